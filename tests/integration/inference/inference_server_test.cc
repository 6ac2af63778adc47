// dtrain-infer as a real process, called over loopback gRPC: health, reflection, hot
// reload, refused checkpoints, bad requests, shutdown.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "common/checkpoint/checkpoint.h"
#include "tests/integration/inference/infer_process.h"

namespace dtrain::testing {
namespace {

using checkpoint::ParamsPath;
using checkpoint::SymbolPath;
using grpc::health::v1::HealthCheckResponse;

constexpr absl::Duration kSwitchTimeout = absl::Seconds(15);

// A fresh directory holding the trained checkpoint's symbol and the given epochs.
std::string ServedPrefix(std::vector<int> epochs) {
  const std::string prefix = ScratchDir() + "/m";
  InstallFile(checkpoint::SymbolPath(Trained().prefix), checkpoint::SymbolPath(prefix));
  for (int e : epochs) InstallFile(checkpoint::ParamsPath(Trained().prefix, e), checkpoint::ParamsPath(prefix, e));
  return prefix;
}

absl::StatusOr<v1::PredictResponse> Call(InferProcess& server, const v1::PredictRequest& req,
                                         absl::Duration timeout = absl::Seconds(10)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  v1::PredictResponse resp;
  absl::Status s = FromGrpc(server.inference().Predict(&ctx, req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::ModelInfoResponse> Info(InferProcess& server) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
  v1::ModelInfoResponse resp;
  absl::Status s = FromGrpc(server.inference().ModelInfo(&ctx, v1::ModelInfoRequest(), &resp));
  if (!s.ok()) return s;
  return resp;
}

// Polls ModelInfo until `done` holds for it, or the timeout.
template <typename Pred>
bool WaitForInfo(InferProcess& server, Pred done, absl::Duration timeout = kSwitchTimeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    auto info = Info(server);
    if (info.ok() && done(*info)) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

TEST(InferenceServerTest, HealthGoesServingOnlyAfterTheFirstModelLoads) {
  const std::string prefix = ScratchDir() + "/m";  // nothing there yet
  InferProcess server({"--model-prefix", prefix, "--wait-for-model", "60", "--watch-interval", "0.2"});
  ASSERT_TRUE(server.started());
  EXPECT_EQ(server.Health(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(server.Health("dtrain.v1.Inference"), HealthCheckResponse::NOT_SERVING);
  auto info = Info(server);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(info.status().message(), "no model loaded yet")) << info.status();
  EXPECT_EQ(Call(server, T10kRequest(1)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(server.process().WaitForOutput("no checkpoint m-NNNN.params in", absl::Seconds(10)))
      << server.process().output();

  // The symbol alone is not a model.
  InstallFile(checkpoint::SymbolPath(Trained().prefix), checkpoint::SymbolPath(prefix));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(server.Health(), HealthCheckResponse::NOT_SERVING);

  const absl::Time installed = absl::Now();
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 1), checkpoint::ParamsPath(prefix, 1));
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(10))) << server.process().output();
  EXPECT_EQ(server.Health("dtrain.v1.Inference"), HealthCheckResponse::SERVING);
  info = Info(server);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->network(), "lenet");
  EXPECT_EQ(info->epoch(), 1);
  EXPECT_EQ(info->num_classes(), 10);
  ASSERT_EQ(info->class_names_size(), 10);
  EXPECT_EQ(info->class_names(9), "Ankle boot");
  EXPECT_EQ(std::vector<int64_t>(info->input_shape().begin(), info->input_shape().end()),
            (std::vector<int64_t>{1, 28, 28}));
  // File names only: the server's directories are not shown to callers.
  EXPECT_EQ(info->params_path(), std::filesystem::path(checkpoint::ParamsPath(prefix, 1)).filename().string());
  EXPECT_EQ(info->params_path().find('/'), std::string::npos);
  EXPECT_GE(info->loaded_unix_ms(), absl::ToUnixMillis(installed) - 1000);
  EXPECT_EQ(info->max_batch(), 1024);
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
}

TEST(InferenceServerTest, ReflectionListsAndDescribesTheServices) {
  InferProcess server({"--model-prefix", ServedPrefix({1})});
  ASSERT_TRUE(server.started());
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(server.Connect());
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "dtrain.v1.Inference"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
  req.set_file_containing_symbol("dtrain.v1.Inference");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0) << resp.DebugString();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(server.Stop(), 0);
}

// Clients keep calling while a newer epoch is written: no call fails, epochs only move
// forward, and every answer is exactly the one its epoch gives (no answer mixes models).
TEST(InferenceServerTest, HotReloadSwitchesEpochsWhileClientsKeepCalling) {
  const std::string prefix = ServedPrefix({1});
  InferProcess server({"--model-prefix", prefix, "--watch-interval", "0.2"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(10)));
  const v1::PredictRequest req = T10kRequest(16, 3);

  std::atomic<int> failures{0}, on_epoch2{0};
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::map<int, std::string> answer_by_epoch;  // serialized predictions
  std::vector<std::string> errors;
  auto client = [&] {
    int last_epoch = 0;
    while (!stop.load()) {
      auto resp = Call(server, req);
      absl::MutexLock lock(&mu);
      if (!resp.ok()) {
        ++failures;
        errors.push_back(resp.status().ToString());
        continue;
      }
      if (resp->epoch() < last_epoch) errors.push_back("epoch went back");
      last_epoch = resp->epoch();
      if (last_epoch == 2) ++on_epoch2;
      std::string predictions;
      for (const auto& p : resp->predictions()) predictions += p.SerializeAsString();
      auto [it, first] = answer_by_epoch.emplace(resp->epoch(), predictions);
      if (!first && it->second != predictions) errors.push_back("answers differ within one epoch");
    }
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) clients.emplace_back(client);
  absl::SleepFor(absl::Milliseconds(300));
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 2), checkpoint::ParamsPath(prefix, 2));
  const absl::Time give_up = absl::Now() + kSwitchTimeout;
  while (on_epoch2.load() < 30 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
  stop.store(true);
  for (auto& t : clients) t.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_GE(on_epoch2.load(), 30) << server.process().output();
  EXPECT_EQ(answer_by_epoch.count(1), 1u);
  EXPECT_EQ(answer_by_epoch.count(2), 1u);
  EXPECT_NE(answer_by_epoch[1], answer_by_epoch[2]) << "epochs 1 and 2 answered alike";
  EXPECT_TRUE(absl::StrContains(server.process().output(), "replacing epoch 1"));
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
}

TEST(InferenceServerTest, CorruptNewerCheckpointIsRefusedAndTheOldModelKeepsServing) {
  const std::string prefix = ServedPrefix({1});
  InferProcess server({"--model-prefix", prefix, "--watch-interval", "0.1"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(10)));

  std::string bytes = ReadWholeFile(checkpoint::ParamsPath(Trained().prefix, 2));
  bytes[bytes.size() / 2] ^= 0x40;  // one flipped bit: the CRC must catch it
  InstallBytes(bytes, checkpoint::ParamsPath(prefix, 2));
  ASSERT_TRUE(WaitForInfo(server, [](const v1::ModelInfoResponse& i) { return !i.reload_error().empty(); }))
      << server.process().output();
  auto info = Info(server);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->epoch(), 1);
  EXPECT_TRUE(absl::StrContains(info->reload_error(), "epoch 2 refused")) << info->reload_error();
  EXPECT_TRUE(absl::StrContains(info->reload_error(), "m-0002.params")) << info->reload_error();
  auto resp = Call(server, T10kRequest(4));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->epoch(), 1);
  EXPECT_EQ(server.Health(), HealthCheckResponse::SERVING);
  // Logged once, not on every look at the directory.
  absl::SleepFor(absl::Milliseconds(500));
  const std::string& log = server.process().output();
  EXPECT_TRUE(absl::StrContains(log, "refusing checkpoint epoch 2")) << log;
  EXPECT_EQ(log.find("refusing checkpoint epoch 2"), log.rfind("refusing checkpoint epoch 2")) << log;

  // A good epoch after the bad one is taken, and the error clears.
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 2), checkpoint::ParamsPath(prefix, 3));
  ASSERT_TRUE(WaitForInfo(server, [](const v1::ModelInfoResponse& i) { return i.epoch() == 3; }))
      << server.process().output();
  EXPECT_EQ(Info(server)->reload_error(), "");
  EXPECT_EQ(server.Stop(), 0);
}

struct BadCase {
  const char* name;
  std::function<void(v1::PredictRequest*)> edit;
  absl::StatusCode code;
  const char* message;
};

TEST(InferenceServerTest, EveryBadRequestGetsItsCodeAndMessage) {
  InferProcess server({"--model-prefix", ServedPrefix({1}), "--max-batch", "8"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(10)));
  auto floats = [](int count, float poison, int at) {
    return [=](v1::PredictRequest* r) {
      std::vector<float> v(static_cast<size_t>(count) * 784, 0.5f);
      v[static_cast<size_t>(at)] = poison;
      r->set_pixel_type(v1::PIXEL_TYPE_FLOAT32);
      r->set_data(v.data(), v.size() * sizeof(float));
      r->clear_shape();
      for (int64_t d : {int64_t{count}, int64_t{1}, int64_t{28}, int64_t{28}}) r->add_shape(d);
    };
  };
  auto shape = [](std::vector<int64_t> s, size_t bytes) {
    return [=](v1::PredictRequest* r) {
      r->clear_shape();
      for (int64_t d : s) r->add_shape(d);
      r->set_data(std::string(bytes, '\x10'));
    };
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  const std::vector<BadCase> cases = {
      {"wrong size", shape({1, 32, 32}, 1024), kInvalid, "the model expects [N,1,28,28]"},
      {"wrong channels", shape({1, 3, 28, 28}, 3 * 784), kInvalid, "the model expects [N,1,28,28]"},
      {"no pixel type", [](v1::PredictRequest* r) { r->clear_pixel_type(); }, kInvalid, "pixel type is unspecified"},
      {"float32 label on uint8 bytes", [](v1::PredictRequest* r) { r->set_pixel_type(v1::PIXEL_TYPE_FLOAT32); },
       kInvalid, "expected 6272 for 2 float32 image(s)"},
      {"short data", shape({2, 28, 28}, 784), kInvalid, "expected 1568"},
      {"empty batch", shape({0, 28, 28}, 0), kInvalid, "empty batch"},
      {"batch over max", shape({9, 28, 28}, 9 * 784), kInvalid, "batch of 9 images is over the limit of 8"},
      {"NaN pixel", floats(2, nan, 784 + 5), kInvalid, "image 1 pixel 5 is NaN"},
      {"Inf pixel", floats(1, -inf, 700), kInvalid, "image 0 pixel 700 is -Inf"},
      {"negative top_k", [](v1::PredictRequest* r) { r->set_top_k(-1); }, kInvalid, "top_k is -1"},
  };
  for (const BadCase& c : cases) {
    v1::PredictRequest req = T10kRequest(2);
    c.edit(&req);
    auto resp = Call(server, req);
    EXPECT_EQ(resp.status().code(), c.code) << c.name << ": " << resp.status();
    EXPECT_TRUE(absl::StrContains(resp.status().message(), c.message)) << c.name << ": " << resp.status();
  }
  // Deadlines: one that has passed is refused, and the server is still answering after.
  auto late = Call(server, T10kRequest(8), absl::Microseconds(1));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  auto fine = Call(server, T10kRequest(8, 20));
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->predictions_size(), 8);
  EXPECT_EQ(fine->predictions(0).top_size(), 10) << "top_k above the class count returns every class";
  EXPECT_EQ(server.Stop(), 0);
}

TEST(InferenceServerTest, GivesUpWhenNoCheckpointAppearsInTime) {
  const std::string prefix = ScratchDir() + "/absent";
  auto [code, out] =
      RunToEnd({Bin("dtrain-infer"), "--model-prefix", prefix, "--wait-for-model", "0.5"}, absl::Seconds(20));
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "no model to serve after waiting 0.5 s")) << out;
  EXPECT_TRUE(absl::StrContains(out, "no checkpoint absent-NNNN.params in")) << out;
  auto [usage_code, usage] =
      RunToEnd({Bin("dtrain-infer"), "--max-batch", "0", "--model-prefix", prefix}, absl::Seconds(20));
  EXPECT_EQ(usage_code, 2) << usage;
  EXPECT_TRUE(absl::StrContains(usage, "--max-batch must be in [1, 1048576], got 0")) << usage;
}

TEST(InferenceServerTest, PredictCommandPrintsAccuracyAndDrawsTheGrid) {
  InferProcess server({"--model-prefix", ServedPrefix({1})});
  ASSERT_TRUE(server.started());
  const std::string dir = ScratchDir();
  const std::string data = kDataDir;
  auto [code, out] = RunToEnd({Bin("dtrain"), "predict", "--server", server.address(), "--images",
                               data + "/t10k-images-idx3-ubyte.gz", "--labels", data + "/t10k-labels-idx1-ubyte.gz",
                               "--limit", "120", "--batch", "50", "--render", dir + "/grid.png"},
                              absl::Seconds(60));
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "#119  ")) << out;
  EXPECT_FALSE(absl::StrContains(out, "#120  ")) << out;
  EXPECT_TRUE(absl::StrContains(out, " of 120 right), lenet epoch 1")) << out;
  EXPECT_EQ(ValuesAfter(out, "accuracy").size(), 1u) << out;
  EXPECT_TRUE(absl::StrContains(out, "picture: " + dir + "/grid.png (100 images)")) << out;
  EXPECT_EQ(ReadWholeFile(dir + "/grid.png").substr(0, 8), "\x89PNG\r\n\x1a\n");

  // Any PNG is an input: the grid itself, shrunk to 28x28.
  auto [png_code, png_out] =
      RunToEnd({Bin("dtrain"), "predict", "--server", server.address(), dir + "/grid.png"}, absl::Seconds(30));
  EXPECT_EQ(png_code, 0) << png_out;
  EXPECT_TRUE(absl::StrContains(png_out, dir + "/grid.png  ")) << png_out;
  auto [bad_code, bad_out] = RunToEnd({Bin("dtrain"), "predict", "--server", server.address()}, absl::Seconds(30));
  EXPECT_EQ(bad_code, 2) << bad_out;
  EXPECT_TRUE(absl::StrContains(bad_out, "give either --images")) << bad_out;
  auto [gone_code, gone_out] =
      RunToEnd({Bin("dtrain"), "predict", "--server", server.address(), dir + "/none.png"}, absl::Seconds(30));
  EXPECT_EQ(gone_code, 1) << gone_out;
  EXPECT_TRUE(absl::StrContains(gone_out, "no such image file: " + dir + "/none.png")) << gone_out;
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace dtrain::testing
