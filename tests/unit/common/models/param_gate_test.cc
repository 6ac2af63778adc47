// Network::SetParamGate (--overlap): a worker starts the next forward while
// the servers' weights are still arriving and waits for each layer in the gate. So every
// network must gate every parameter before its first use. Checked by behaviour: the
// parameters start as NaN and each gated module receives its real weights only in the
// gate, as a worker's would; the output must equal the ungated forward's, bit for bit.
#include <torch/torch.h>

#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/models/models.h"
#include "gtest/gtest.h"

namespace dtrain::models {
namespace {

struct Case {
  NetworkSpec spec;
  std::vector<int64_t> input;  // [C, H, W]
};

std::vector<Case> Cases() {
  return {{{"mlp", {}}, {1, 28, 28}},      {{"mlp", {64, 32, 16}}, {1, 28, 28}}, {{"lenet", {}}, {1, 28, 28}},
          {{"lenet", {}}, {3, 32, 32}},    {{"resnet", {}, 20}, {1, 28, 28}},    {{"resnet", {}, 8}, {3, 32, 32}},
          {{"resnet18", {}}, {3, 32, 32}}, {{"resnet18", {}}, {1, 96, 96}}};
}

std::string Name(const Case& c) {
  return c.spec.name + (c.spec.num_layers > 0 ? std::to_string(c.spec.num_layers) : "") + " on " +
         std::to_string(c.input[0]) + "x" + std::to_string(c.input[1]) + "x" + std::to_string(c.input[2]);
}

TEST(ParamGateTest, EveryParameterIsGatedBeforeItsFirstUse) {
  torch::NoGradGuard no_grad;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(Name(c));
    torch::manual_seed(3);
    absl::StatusOr<std::shared_ptr<Network>> made = CreateNetwork(c.spec, 10, c.input);
    ASSERT_TRUE(made.ok()) << made.status();
    Network& net = **made;
    net.eval();  // batch norm from its running statistics: the same in both passes
    const torch::Tensor x = torch::rand({2, c.input[0], c.input[1], c.input[2]});
    const torch::Tensor expected = net.forward(x).clone();

    std::vector<torch::Tensor> params = net.parameters();
    std::unordered_map<const void*, torch::Tensor> saved;
    for (torch::Tensor& p : params) {
      saved[p.unsafeGetTensorImpl()] = p.clone();
      p.fill_(std::numeric_limits<float>::quiet_NaN());
    }
    size_t gated = 0;
    std::vector<std::string> order;
    net.SetParamGate([&](const torch::nn::Module& m) {
      for (const torch::Tensor& p : m.parameters()) {
        auto it = saved.find(p.unsafeGetTensorImpl());
        if (it == saved.end()) continue;  // gated before: its weights are in
        torch::Tensor(p).copy_(it->second);
        saved.erase(it);
        ++gated;
      }
      order.push_back(m.name());
    });
    const torch::Tensor out = net.forward(x);
    EXPECT_EQ(gated, params.size()) << "parameters never gated";
    EXPECT_TRUE(torch::equal(out, expected)) << "a parameter was used before its gate";

    // Gated again (the next step): nothing is left to hand over, the result is the same.
    EXPECT_TRUE(torch::equal(net.forward(x), expected));
    net.SetParamGate(nullptr);
    EXPECT_TRUE(torch::equal(net.forward(x), expected));
  }
}

}  // namespace
}  // namespace dtrain::models
