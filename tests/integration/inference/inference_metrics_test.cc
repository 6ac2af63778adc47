// dtrain-infer's Prometheus endpoint, scraped from the real process after real calls.
#include <fstream>

#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "gtest/gtest.h"
#include "common/checkpoint/checkpoint.h"
#include "tests/integration/inference/infer_process.h"
#include "tests/unit/common/metrics/exposition.h"
#include "tests/unit/common/metrics/http_get.h"

namespace dtrain::testing {
namespace {

int ReadPort(const std::string& path, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return 0;
}

TEST(InferenceMetricsTest, RequestsByCodeLatencyAndLoadedEpoch) {
  const std::string dir = ScratchDir();
  const std::string prefix = dir + "/m";
  InstallFile(checkpoint::SymbolPath(Trained().prefix), checkpoint::SymbolPath(prefix));
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 2), checkpoint::ParamsPath(prefix, 2));
  InferProcess server({"--model-prefix", prefix, "--metrics-port", "0", "--metrics-port-file", dir + "/metrics.port"});
  ASSERT_TRUE(server.started()) << server.process().output();
  ASSERT_TRUE(server.WaitForHealth(1 /* SERVING */, absl::Seconds(30))) << server.process().output();
  const int port = ReadPort(dir + "/metrics.port", absl::Seconds(10));
  ASSERT_GT(port, 0) << server.process().output();

  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    v1::PredictResponse resp;
    ASSERT_TRUE(server.inference().Predict(&ctx, T10kRequest(4), &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
    v1::PredictRequest empty = T10kRequest(1);
    empty.clear_data();
    v1::PredictResponse resp;
    EXPECT_EQ(server.inference().Predict(&ctx, empty, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }

  auto page = HttpGet(port, "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  auto exp = ParseExposition(page->body);
  ASSERT_TRUE(exp.ok()) << exp.status() << "\n" << page->body;
  const std::map<std::string, std::string> me = {{"role", "inference"}, {"rank", "0"}};
  auto ok = exp->Find("dtrain_inference_requests_total", {{"code", "OK"}, {"role", "inference"}});
  ASSERT_EQ(ok.size(), 1u) << page->body;
  EXPECT_EQ(ok[0].value, 3);
  auto bad = exp->Find("dtrain_inference_requests_total", {{"code", "INVALID_ARGUMENT"}});
  ASSERT_EQ(bad.size(), 1u) << page->body;
  EXPECT_EQ(bad[0].value, 1);
  auto count = exp->Find("dtrain_inference_request_duration_seconds_count", me);
  ASSERT_EQ(count.size(), 1u) << page->body;
  EXPECT_EQ(count[0].value, 4);
  auto epoch = exp->Find("dtrain_inference_loaded_epoch", me);
  ASSERT_EQ(epoch.size(), 1u) << page->body;
  EXPECT_EQ(epoch[0].value, 2);
  // The three valid calls ran one after another: three forwards of 4 images each (the
  // refused call never reached the batcher).
  auto batches = exp->Find("dtrain_inference_batch_images_count", me);
  ASSERT_EQ(batches.size(), 1u) << page->body;
  EXPECT_EQ(batches[0].value, 3);
  auto images = exp->Find("dtrain_inference_batch_images_sum", me);
  ASSERT_EQ(images.size(), 1u) << page->body;
  EXPECT_EQ(images[0].value, 12);
}

}  // namespace
}  // namespace dtrain::testing
