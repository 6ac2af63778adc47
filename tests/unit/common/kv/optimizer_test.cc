#include "common/kv/optimizer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Optimizer> Make(const OptimizerOptions& o) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(o);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? *std::move(opt) : nullptr;
}

TEST(OptimizerTest, SgdMomentumAndWeightDecayMatchHandComputedSteps) {
  OptimizerOptions o;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  auto opt = Make(o);
  ASSERT_NE(opt, nullptr);
  ASSERT_EQ(opt->StateSlots(), 1);
  float w = 1.0f;
  float mom = 0.0f;
  const float grads[] = {0.5f, -0.25f, 1.0f};
  // By hand: g' = g + wd*w; mom = 0.9*mom - 0.1*g'; w += mom.
  //   1: g' = 0.51        mom = -0.051        w = 0.949
  //   2: g' = -0.24051    mom = -0.021849     w = 0.927151
  //   3: g' = 1.00927151  mom = -0.120591251  w = 0.806559749
  const double want_w[] = {0.949, 0.927151, 0.806559749};
  const double want_mom[] = {-0.051, -0.021849, -0.120591251};
  for (int t = 0; t < 3; ++t) {
    opt->Update(t, &w, &grads[t], &mom, 1);
    EXPECT_NEAR(w, want_w[t], 1e-6) << "step " << t;
    EXPECT_NEAR(mom, want_mom[t], 1e-6) << "step " << t;
  }
}

TEST(OptimizerTest, PlainSgdHasNoStateAndAppliesRescaleThenClip) {
  OptimizerOptions o;
  o.learning_rate = 0.1;
  o.rescale_grad = 2.0;
  o.clip_gradient = 0.5;
  auto opt = Make(o);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->StateSlots(), 0);
  std::vector<float> w = {1.0f, 1.0f, 1.0f};
  const std::vector<float> g = {1.0f, -0.1f, -3.0f};  // rescaled: 2, -0.2, -6 -> clipped 0.5, -0.2, -0.5
  opt->Update(0, w.data(), g.data(), nullptr, 3);
  EXPECT_NEAR(w[0], 0.95, 1e-7);
  EXPECT_NEAR(w[1], 1.02, 1e-7);
  EXPECT_NEAR(w[2], 1.05, 1e-7);
}

TEST(OptimizerTest, AdamBiasCorrection) {
  OptimizerOptions o;
  o.name = "adam";
  o.learning_rate = 0.01;
  auto opt = Make(o);
  ASSERT_NE(opt, nullptr);
  ASSERT_EQ(opt->StateSlots(), 2);
  float w = 1.0f;
  float state[2] = {0, 0};  // m, v
  // t=1: m = 0.1*g, v = 0.001*g^2; the correction sqrt(1-b2)/(1-b1) cancels them, so
  // the first step is lr * sign(g) (up to eps).
  const float g1 = 0.3f;
  opt->Update(0, &w, &g1, state, 1);
  EXPECT_NEAR(state[0], 0.03, 1e-7);
  EXPECT_NEAR(state[1], 0.00009, 1e-9);
  EXPECT_NEAR(w, 0.99, 1e-6);
  // t=2: m = 0.9*0.03 + 0.1*(-0.1) = 0.017; v = 0.999*9e-5 + 0.001*0.01 = 9.991e-5;
  // lr_t = 0.01 * sqrt(1 - 0.999^2) / (1 - 0.9^2).
  const float g2 = -0.1f;
  opt->Update(1, &w, &g2, state, 1);
  const double lr_t = 0.01 * std::sqrt(1 - 0.998001) / (1 - 0.81);
  EXPECT_NEAR(state[0], 0.017, 1e-7);
  EXPECT_NEAR(state[1], 9.991e-5, 1e-9);
  EXPECT_NEAR(w, 0.99 - lr_t * 0.017 / (std::sqrt(9.991e-5) + 1e-8), 1e-6);
}

TEST(OptimizerTest, LearningRateFollowsMultiFactorSchedule) {
  OptimizerOptions o;
  o.learning_rate = 1.0;
  o.lr_factor = 0.5;
  o.lr_steps = {2, 5};
  auto opt = Make(o);
  ASSERT_NE(opt, nullptr);
  const double want[] = {1, 1, 0.5, 0.5, 0.5, 0.25, 0.25};
  for (int64_t c = 0; c < 7; ++c) EXPECT_DOUBLE_EQ(opt->LearningRate(c), want[c]) << "update " << c;
  // The schedule drives Update: at count 5 the step is a quarter.
  float w = 0;
  const float g = 1;
  opt->Update(5, &w, &g, nullptr, 1);
  EXPECT_FLOAT_EQ(w, -0.25f);
}

TEST(OptimizerTest, LongVectorsMatchElementwiseUpdate) {
  // The vectorised loop must treat every element alike, including the tail.
  OptimizerOptions o;
  o.learning_rate = 0.05;
  o.momentum = 0.5;
  auto opt = Make(o);
  ASSERT_NE(opt, nullptr);
  const int n = 1003;
  std::vector<float> w(n), g(n), m(n, 0.0f);
  for (int i = 0; i < n; ++i) {
    w[i] = 0.001f * i;
    g[i] = 1.0f - 0.002f * i;
  }
  std::vector<float> w1 = w, m1 = m;
  opt->Update(0, w.data(), g.data(), m.data(), n);
  for (int i = 0; i < n; ++i) {
    opt->Update(0, &w1[i], &g[i], &m1[i], 1);
    ASSERT_EQ(w[i], w1[i]) << "element " << i;
  }
}

// The shard store updates into a spare buffer when it keeps the previous version: the
// result must be the in-place update's, bit for bit, for every optimizer and every
// element (the vectorised body and the tail), and the input must stay as it was.
TEST(OptimizerTest, UpdateIntoIsBitIdenticalToUpdateAndLeavesTheInputAlone) {
  OptimizerOptions sgd;
  sgd.learning_rate = 0.05;
  OptimizerOptions momentum = sgd;
  momentum.momentum = 0.9;
  momentum.weight_decay = 0.01;
  momentum.clip_gradient = 0.7;
  OptimizerOptions adam;
  adam.name = "adam";
  adam.learning_rate = 0.01;
  adam.rescale_grad = 0.5;
  for (const OptimizerOptions& o : {sgd, momentum, adam}) {
    auto opt = Make(o);
    ASSERT_NE(opt, nullptr);
    const int n = 1003;
    std::vector<float> w(n), g(n);
    for (int i = 0; i < n; ++i) {
      w[i] = 0.001f * static_cast<float>(i) - 0.3f;
      g[i] = 1.0f - 0.0021f * static_cast<float>(i);
    }
    std::vector<float> state(static_cast<size_t>(opt->StateSlots()) * n, 0.0f);
    std::vector<float> in_place = w, state_in_place = state;
    std::vector<float> out(n, -1.0f);
    for (int64_t t = 0; t < 3; ++t) {  // a few steps, so the state matters too
      const std::vector<float> before = w;
      opt->Update(t, in_place.data(), g.data(), state_in_place.data(), n);
      opt->UpdateInto(t, w.data(), out.data(), g.data(), state.data(), n);
      ASSERT_EQ(w, before) << o.name << " step " << t << ": UpdateInto wrote its input";
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&out[i], &in_place[i], sizeof(float)), 0)
            << o.name << " momentum " << o.momentum << " step " << t << " element " << i;
      }
      ASSERT_EQ(std::memcmp(state.data(), state_in_place.data(), state.size() * sizeof(float)), 0) << o.name;
      w.swap(out);
    }
  }
}

// An elastic job's lr factor (kv::StepLr): the rate times the factor, and a factor of
// 1.0 exactly the update without one (the contract hashes of jobs that are not elastic).
TEST(OptimizerTest, AnLrScaleMultipliesTheRateAndOneChangesNoBit) {
  OptimizerOptions sgd;
  sgd.learning_rate = 0.1;
  sgd.momentum = 0.9;
  sgd.lr_steps = {2};
  sgd.lr_factor = 0.5;
  OptimizerOptions adam;
  adam.name = "adam";
  adam.learning_rate = 0.003;
  for (const OptimizerOptions& o : {sgd, adam}) {
    auto opt = Make(o);
    ASSERT_NE(opt, nullptr);
    EXPECT_EQ(opt->ScaledLearningRate(3, 1.0), opt->LearningRate(3));
    EXPECT_EQ(opt->ScaledLearningRate(3, 1.5), opt->LearningRate(3) * 1.5);
    OptimizerOptions doubled = o;
    doubled.learning_rate = o.learning_rate * 2.0;
    auto twice = Make(doubled);
    ASSERT_NE(twice, nullptr);
    const int n = 257;
    std::vector<float> g(n), w(n), plain, scaled, by_two, state(static_cast<size_t>(opt->StateSlots()) * n, 0.0f);
    for (int i = 0; i < n; ++i) {
      w[i] = 0.002f * static_cast<float>(i) - 0.2f;
      g[i] = 0.7f - 0.003f * static_cast<float>(i);
    }
    plain = scaled = by_two = w;
    std::vector<float> s_plain = state, s_scaled = state, s_two = state, s_by_two = state;
    std::vector<float> two = w;
    for (int64_t t = 0; t < 4; ++t) {  // across the lr step
      opt->Update(t, plain.data(), g.data(), s_plain.data(), n);
      opt->Update(t, scaled.data(), g.data(), s_scaled.data(), n, 1.0);
      opt->Update(t, two.data(), g.data(), s_two.data(), n, 2.0);
      twice->Update(t, by_two.data(), g.data(), s_by_two.data(), n);
    }
    EXPECT_EQ(std::memcmp(plain.data(), scaled.data(), n * sizeof(float)), 0) << o.name;
    EXPECT_EQ(std::memcmp(s_plain.data(), s_scaled.data(), s_plain.size() * sizeof(float)), 0) << o.name;
    // Doubling is exact in double, so a factor 2 is bit for bit the doubled rate.
    EXPECT_EQ(std::memcmp(two.data(), by_two.data(), n * sizeof(float)), 0) << o.name;
    EXPECT_NE(std::memcmp(two.data(), plain.data(), n * sizeof(float)), 0) << o.name;
  }
}

struct BadCase {
  const char* what;
  void (*mutate)(OptimizerOptions&);
  const char* names;
};

TEST(OptimizerTest, RejectsOutOfRangeSettingsNamingThem) {
  const BadCase cases[] = {
      {"unknown name", [](OptimizerOptions& o) { o.name = "rmsprop"; }, "rmsprop"},
      {"lr 0", [](OptimizerOptions& o) { o.learning_rate = 0; }, "learning_rate"},
      {"lr NaN", [](OptimizerOptions& o) { o.learning_rate = NAN; }, "learning_rate"},
      {"momentum 1", [](OptimizerOptions& o) { o.momentum = 1.0; }, "momentum"},
      {"momentum < 0", [](OptimizerOptions& o) { o.momentum = -0.1; }, "momentum"},
      {"wd < 0", [](OptimizerOptions& o) { o.weight_decay = -1; }, "weight_decay"},
      {"factor 0", [](OptimizerOptions& o) { o.lr_factor = 0; }, "lr_factor"},
      {"factor > 1", [](OptimizerOptions& o) { o.lr_factor = 2; }, "lr_factor"},
      {"unsorted steps",
       [](OptimizerOptions& o) {
         o.lr_steps = {10, 5};
       },
       "lr_steps"},
      {"step 0", [](OptimizerOptions& o) { o.lr_steps = {0}; }, "lr_steps"},
      {"rescale 0", [](OptimizerOptions& o) { o.rescale_grad = 0; }, "rescale_grad"},
      {"beta1 1",
       [](OptimizerOptions& o) {
         o.name = "adam";
         o.beta1 = 1;
       },
       "beta1"},
      {"beta2 < 0",
       [](OptimizerOptions& o) {
         o.name = "adam";
         o.beta2 = -0.5;
       },
       "beta2"},
      {"epsilon 0",
       [](OptimizerOptions& o) {
         o.name = "adam";
         o.epsilon = 0;
       },
       "epsilon"},
  };
  for (const BadCase& c : cases) {
    OptimizerOptions o;
    c.mutate(o);
    absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(o);
    ASSERT_FALSE(opt.ok()) << c.what;
    EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(opt.status().message()), HasSubstr(c.names)) << c.what;
  }
  OptimizerOptions fine;
  fine.lr_steps = {1, 2, 3};
  EXPECT_TRUE(CreateOptimizer(fine).ok());
}

}  // namespace
}  // namespace dtrain::kv
