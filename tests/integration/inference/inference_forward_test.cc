// dtrain-infer's answers against LibTorch in this process: the same checkpoint run
// directly must give the same probabilities, and over all of t10k the same accuracy the
// trainer logged as Validation-accuracy for that epoch.
#include <cmath>

#include <torch/torch.h>

#include "absl/strings/str_format.h"
#include "common/grpc_util.h"
#include "gtest/gtest.h"
#include "common/checkpoint/checkpoint.h"
#include "common/data/idx_reader.h"
#include "common/models/models.h"
#include "tests/integration/inference/infer_process.h"

namespace dtrain::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

// The checkpoint's network, loaded the way the trainer resumes one.
std::shared_ptr<models::Network> LoadDirect(const std::string& prefix, int epoch) {
  auto net = models::CreateNetwork("lenet", 10);
  EXPECT_TRUE(net.ok()) << net.status();
  auto params = checkpoint::ReadParams(checkpoint::ParamsPath(prefix, epoch));
  EXPECT_TRUE(params.ok()) << params.status();
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& p : (*net)->parameters()) {
    std::memcpy(p.data_ptr<float>(), (*params)[i++].data.data(), sizeof(float) * p.numel());
  }
  (*net)->eval();
  return *net;
}

absl::StatusOr<v1::PredictResponse> Call(InferProcess& server, const v1::PredictRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(30)));
  v1::PredictResponse resp;
  absl::Status s = FromGrpc(server.inference().Predict(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

TEST(InferenceForwardTest, PredictionsMatchAnInProcessForwardOfTheSameCheckpoint) {
  const TrainedCheckpoint& t = Trained();
  InferProcess server({"--model-prefix", t.prefix, "--epoch", "1"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(20))) << server.process().output();
  constexpr int kCount = 64;
  const v1::PredictRequest as_bytes = T10kRequest(kCount, /*top_k=*/10);

  torch::Tensor pixels =
      torch::from_blob(const_cast<char*>(as_bytes.data().data()), {kCount, 1, 28, 28}, torch::kUInt8);
  torch::Tensor images = pixels.to(torch::kFloat32).div_(255.0f);
  torch::Tensor probs;
  {
    torch::NoGradGuard no_grad;
    probs = torch::softmax(LoadDirect(t.prefix, 1)->forward(images), 1).contiguous();
  }
  // The same images once as uint8 and once as float32 [N,1,28,28].
  v1::PredictRequest as_floats = as_bytes;
  as_floats.set_pixel_type(v1::PIXEL_TYPE_FLOAT32);
  as_floats.set_data(images.data_ptr<float>(), images.numel() * sizeof(float));
  as_floats.clear_shape();
  for (int64_t d : {int64_t{kCount}, int64_t{1}, int64_t{28}, int64_t{28}}) as_floats.add_shape(d);

  for (const v1::PredictRequest* req : std::vector<const v1::PredictRequest*>{&as_bytes, &as_floats}) {
    auto resp = Call(server, *req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->epoch(), 1);
    ASSERT_EQ(resp->predictions_size(), kCount);
    for (int i = 0; i < kCount; ++i) {
      const v1::Prediction& p = resp->predictions(i);
      ASSERT_EQ(p.top_size(), 10);
      EXPECT_EQ(p.top(0).class_id(), probs[i].argmax().item<int64_t>()) << "image " << i;
      for (const v1::ClassScore& c : p.top()) {
        EXPECT_NEAR(c.probability(), probs[i][c.class_id()].item<float>(), 1e-6) << "image " << i;
      }
      EXPECT_GE(p.top(0).probability(), p.top(9).probability());
    }
  }
  EXPECT_EQ(server.Stop(), 0);
}

TEST(InferenceForwardTest, AccuracyOverT10kEqualsTheTrainersValidationAccuracy) {
  const TrainedCheckpoint& t = Trained();
  ASSERT_EQ(t.validation.size(), 2u);
  auto labels = data::ReadIdx(std::string(kDataDir) + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok()) << labels.status();
  const int total = static_cast<int>(labels->data.size());
  ASSERT_EQ(total, 10000);
  // As the trainer evaluates: chunks of 1000, LibTorch threads = cores.
  InferProcess server({"--model-prefix", t.prefix, "--epoch", "2", "--intra-op-threads",
                       std::to_string(std::max(1u, std::thread::hardware_concurrency()))});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(20))) << server.process().output();
  const v1::PredictRequest all = T10kRequest(total);
  int correct = 0;
  for (int start = 0; start < total; start += 1000) {
    v1::PredictRequest chunk = all;
    chunk.set_shape(0, 1000);
    chunk.set_data(all.data().substr(static_cast<size_t>(start) * 784, 1000 * 784));
    auto resp = Call(server, chunk);
    ASSERT_TRUE(resp.ok()) << resp.status();
    for (int i = 0; i < 1000; ++i) {
      correct += resp->predictions(i).top(0).class_id() == labels->data[static_cast<size_t>(start + i)];
    }
  }
  // The trainer prints %f: compare at that precision, which for 10000 images is exact.
  EXPECT_EQ(absl::StrFormat("%.6f", correct / 10000.0), absl::StrFormat("%.6f", t.validation[1]));
  EXPECT_EQ(server.Stop(), 0);
}

// An mlp trained with --hidden 2048,2048: dtrain-infer builds the network from the widths
// the symbol file records (not MXNet's default 128,64, which these weights would not
// fit) and answers as the same network in this process does.
TEST(InferenceForwardTest, WideMlpIsServedWithTheWidthsItsSymbolRecords) {
  const std::string prefix = ScratchDir() + "/wide";
  torch::manual_seed(3);
  const models::NetworkSpec spec{"mlp", {2048, 2048}};
  std::shared_ptr<models::Network> net = *models::CreateNetwork(spec, 10);
  net->eval();
  std::vector<checkpoint::NamedTensor> tensors;
  for (const auto& p : net->named_parameters()) {
    const torch::Tensor t = p.value().contiguous();
    tensors.push_back(
        {p.key(), t.sizes().vec(), std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel())});
  }
  ASSERT_TRUE(checkpoint::WriteParams(checkpoint::ParamsPath(prefix, 1), tensors).ok());
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, {"mlp", 10, {1, 28, 28}, {}, "", spec.hidden}).ok());

  InferProcess server({"--model-prefix", prefix, "--epoch", "1"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();
  constexpr int kCount = 16;
  const v1::PredictRequest req = T10kRequest(kCount, /*top_k=*/3);
  torch::Tensor pixels = torch::from_blob(const_cast<char*>(req.data().data()), {kCount, 1, 28, 28}, torch::kUInt8);
  torch::Tensor probs;
  {
    torch::NoGradGuard no_grad;
    probs = torch::softmax(net->forward(pixels.to(torch::kFloat32).div_(255.0f)), 1).contiguous();
  }
  auto resp = Call(server, req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->predictions_size(), kCount);
  for (int i = 0; i < kCount; ++i) {
    const v1::Prediction& p = resp->predictions(i);
    EXPECT_EQ(p.top(0).class_id(), probs[i].argmax().item<int64_t>()) << "image " << i;
    for (const v1::ClassScore& c : p.top()) {
      EXPECT_NEAR(c.probability(), probs[i][c.class_id()].item<float>(), 1e-5) << "image " << i;
    }
  }
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace dtrain::testing
