// PushPullHandler: what the server does with each PushPull request, driven without
// gRPC or sockets: a real ShardStore, requests as the reactor decodes them, and a sink
// that records the answers. Deadlines run on injected clocks.
#include "common/kv/push_pull_handler.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// One answer as the reactor would write it: the header, and the data when it carries any.
struct Answer {
  v1::PushPullResponse resp;
  bool with_data = false;
  std::vector<float> data;
};

class RecordingSink final : public AnswerSink {
 public:
  void Send(const v1::PushPullResponse& resp) override {
    absl::MutexLock lock(&mu_);
    answers_.push_back({resp, false, {}});
  }
  DataAnswer Prepare(const char* data, size_t bytes) override {
    std::vector<float> copy(bytes / sizeof(float));
    if (bytes > 0) std::memcpy(copy.data(), data, bytes);
    return [this, copy](const v1::PushPullResponse& resp) {
      absl::MutexLock lock(&mu_);
      answers_.push_back({resp, true, copy});
    };
  }
  std::vector<Answer> answers() {
    absl::MutexLock lock(&mu_);
    return answers_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
};

class PushPullHandlerTest : public ::testing::Test {
 protected:
  PushPullHandlerTest() : store_([this] { return now_; }) {}

  // Sync, SGD with lr 1 over `num_workers` workers; key 3 holds {1, 2}.
  void Configure(int num_workers) {
    kv::StoreConfig c;
    c.mode = kv::MergeMode::kSync;
    c.num_workers = num_workers;
    c.optimizer.learning_rate = 1.0;
    ASSERT_TRUE(store_.Configure(c).ok());
    const float init[] = {1.0f, 2.0f};
    ASSERT_TRUE(store_.InitKey(3, {2}, init, 2).ok());
  }

  std::unique_ptr<PushPullHandler> Handler(const StreamOptions& options = {}) {
    return std::make_unique<PushPullHandler>(&store_, options, sink_, [this] { return now_; });
  }

  static v1::PushPullRequest Request(v1::Op op, int rank, int64_t step) {
    v1::PushPullRequest req;
    req.set_request_id(100 + rank);
    req.set_op(op);
    req.set_worker_rank(rank);
    req.set_step(step);
    req.set_key(3);
    req.set_dtype(v1::DTYPE_FLOAT32);
    return req;
  }

  // Handles `req` with `grad` as its data.
  absl::Status Handle(PushPullHandler& h, const v1::PushPullRequest& req, const std::vector<float>& grad) {
    const int64_t bytes = static_cast<int64_t>(grad.size() * sizeof(float));
    return h.Handle(req, grad.data(), grad.empty() ? -1 : bytes, true);
  }

  absl::Time now_ = kStart;
  kv::ShardStore store_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
};

TEST_F(PushPullHandlerTest, APushPullIsAnsweredWithTheWeightsOnceTheStepMerges) {
  Configure(2);
  auto h0 = Handler();
  auto h1 = Handler();
  ASSERT_TRUE(Handle(*h0, Request(v1::OP_PUSH_PULL, 0, 0), {1.0f, 1.0f}).ok());
  EXPECT_THAT(sink_->answers(), SizeIs(0));  // parked until worker 1's push
  EXPECT_EQ(store_.parked_pulls(), 1);
  ASSERT_TRUE(Handle(*h1, Request(v1::OP_PUSH_PULL, 1, 0), {3.0f, 5.0f}).ok());
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(2));
  for (const Answer& a : answers) {
    EXPECT_EQ(a.resp.code(), 0) << a.resp.message();
    EXPECT_EQ(a.resp.key(), 3u);
    EXPECT_EQ(a.resp.version(), 1);
    EXPECT_TRUE(a.with_data);
    EXPECT_THAT(a.data, ElementsAre(-1.0f, -1.0f));  // {1, 2} - mean({1, 1}, {3, 5})
  }
  EXPECT_THAT((std::vector<uint64_t>{answers[0].resp.request_id(), answers[1].resp.request_id()}),
              ::testing::UnorderedElementsAre(100u, 101u));
}

TEST_F(PushPullHandlerTest, APlainPushIsAnsweredAtOnceWithoutData) {
  Configure(2);
  auto h = Handler();
  ASSERT_TRUE(Handle(*h, Request(v1::OP_PUSH, 0, 0), {1.0f, 1.0f}).ok());
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.code(), 0);
  EXPECT_FALSE(answers[0].with_data);
}

TEST_F(PushPullHandlerTest, AVersionOnlyPullCarriesNoWeights) {
  Configure(1);
  auto h = Handler();
  v1::PushPullRequest req = Request(v1::OP_PULL, 0, 0);
  req.set_version_only(true);
  ASSERT_TRUE(Handle(*h, req, {}).ok());
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.version(), 0);
  EXPECT_FALSE(answers[0].with_data);
}

TEST_F(PushPullHandlerTest, AParkedPullTimesOutAtTheDeadlineItAskedFor) {
  Configure(2);
  auto h = Handler();
  store_.NoteHeardFrom(1);
  v1::PushPullRequest req = Request(v1::OP_PUSH_PULL, 0, 0);
  req.set_timeout_ms(5000);
  ASSERT_TRUE(Handle(*h, req, {1.0f, 1.0f}).ok());
  now_ += absl::Seconds(4);
  store_.CheckDeadlines(now_);
  EXPECT_THAT(sink_->answers(), SizeIs(0));
  now_ += absl::Seconds(1);
  store_.CheckDeadlines(now_);
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(answers[0].resp.message(),
            "step 0 key 3: waiting for worker 1 (last heard 5 s ago); worker 0's pull of version 1 timed out after "
            "5 s");
}

TEST_F(PushPullHandlerTest, AReplacedIncarnationIsRefusedForGood) {
  Configure(2);
  auto newer = Handler();
  auto older = Handler();
  v1::PushPullRequest req = Request(v1::OP_PULL, 0, 0);
  req.set_job_id("job-a");
  req.set_incarnation(2);
  ASSERT_TRUE(Handle(*newer, req, {}).ok());
  req.set_incarnation(1);
  const absl::Status refusal = Handle(*older, req, {});
  EXPECT_EQ(refusal.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refusal.message()), HasSubstr("fenced"));
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(2));
  EXPECT_EQ(answers[1].resp.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(answers[1].resp.message(), refusal.message());
}

TEST_F(PushPullHandlerTest, AStreamBoundToOneWorkerRefusesAnother) {
  Configure(2);
  StreamOptions options;
  auth::TokenClaims bound;
  bound.role = Role::kWorker;
  bound.rank = 1;
  bound.incarnation = 0;
  options.bound_worker = bound;
  auto h = Handler(options);
  const absl::Status refusal = Handle(*h, Request(v1::OP_PULL, 0, 0), {});
  EXPECT_EQ(refusal.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refusal.message()), HasSubstr("may not speak for worker 0 incarnation 0"));
  ASSERT_THAT(sink_->answers(), SizeIs(1));
  EXPECT_TRUE(Handle(*h, Request(v1::OP_PULL, 1, 0), {}).ok());
}

TEST_F(PushPullHandlerTest, ARefusedStreamAnswersTheRefusalFirst) {
  Configure(1);
  StreamOptions options;
  options.refused = absl::UnauthenticatedError("no token");
  auto h = Handler(options);
  v1::PushPullRequest req = Request(v1::OP_PULL, 0, 0);
  req.set_op(static_cast<v1::Op>(99));  // not even looked at
  EXPECT_EQ(Handle(*h, req, {}), absl::UnauthenticatedError("no token"));
  ASSERT_THAT(sink_->answers(), SizeIs(1));
  EXPECT_EQ(sink_->answers()[0].resp.code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
}

TEST_F(PushPullHandlerTest, BadPushesAreAnsweredWithoutEndingTheStream) {
  Configure(1);
  auto h = Handler();
  // NaN in a gradient.
  EXPECT_TRUE(Handle(*h, Request(v1::OP_PUSH, 0, 0), {1.0f, std::nanf("")}).ok());
  // Data that came before `op` on the wire (the codec skipped it).
  const std::vector<float> grad = {1.0f, 1.0f};
  EXPECT_TRUE(h->Handle(Request(v1::OP_PUSH, 0, 0), grad.data(), 8, /*payload_taken=*/false).ok());
  // A compressed push of the wrong size for the key's 2 elements.
  v1::PushPullRequest packed = Request(v1::OP_PUSH, 0, 0);
  packed.set_compression(v1::COMPRESSION_FP16);
  EXPECT_TRUE(Handle(*h, packed, {1.0f, 1.0f}).ok());  // 8 bytes; fp16 of 2 values is 4
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(3));
  EXPECT_THAT(answers[0].resp.message(), HasSubstr("gradient element 1 is NaN"));
  EXPECT_THAT(answers[1].resp.message(), HasSubstr("op must come before data on the wire"));
  EXPECT_THAT(answers[2].resp.message(), HasSubstr("data has 8 bytes, expected 4 for the key's 2 elements"));
  for (const Answer& a : answers) EXPECT_EQ(a.resp.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(store_.updates_applied(), 0);
}

TEST_F(PushPullHandlerTest, ACompressedPushIsUnpackedAndMerged) {
  Configure(1);
  auto h = Handler();
  const auto codec = kv::MakeCodec({kv::CompressionType::kFp16, 1.0f});
  const float grad[] = {0.5f, 0.25f};
  float residual[] = {0.0f, 0.0f};
  std::string bytes(static_cast<size_t>(codec->PackedBytes(2)), '\0');
  codec->Encode(grad, residual, 2, bytes.data());
  std::vector<float> payload((bytes.size() + 3) / 4);
  std::memcpy(payload.data(), bytes.data(), bytes.size());
  v1::PushPullRequest req = Request(v1::OP_PUSH_PULL, 0, 0);
  req.set_compression(v1::COMPRESSION_FP16);
  ASSERT_TRUE(h->Handle(req, payload.data(), static_cast<int64_t>(bytes.size()), true).ok());
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.code(), 0) << answers[0].resp.message();
  EXPECT_THAT(answers[0].data, ElementsAre(0.5f, 1.75f));
}

// Holds every answer until released, as replication does while a newcomer is copied.
class HoldingGate final : public AnswerGate {
 public:
  bool Hold(uint64_t key, int64_t version, Release release, std::vector<JoinedServer>* joined_now) override {
    joined_now->clear();
    held_.push_back(std::move(release));
    versions_.push_back(version);
    return true;
  }
  std::vector<Release> held_;
  std::vector<int64_t> versions_;
};

TEST_F(PushPullHandlerTest, AHeldAnswerGoesOutOnReleaseNamingTheServersThatJoined) {
  Configure(1);
  HoldingGate gate;
  StreamOptions options;
  options.catch_up = &gate;
  auto h = Handler(options);
  ASSERT_TRUE(Handle(*h, Request(v1::OP_PUSH_PULL, 0, 0), {0.5f, 0.5f}).ok());
  EXPECT_THAT(sink_->answers(), SizeIs(0));
  ASSERT_THAT(gate.versions_, ElementsAre(1));
  gate.held_[0]({JoinedServer{2, "10.0.0.2:7000"}});
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_THAT(answers[0].resp.joined_servers(), ElementsAre(2));
  EXPECT_THAT(answers[0].resp.joined_addresses(), ElementsAre("10.0.0.2:7000"));
  EXPECT_THAT(answers[0].data, ElementsAre(0.5f, 1.5f));  // the weights copied when the version was reached
}

// A copy that is already done: the gate lets the answer go at once, and the answer
// still names the servers that joined at its version (a worker whose pull arrives
// after the copy must learn of them from this answer, like the ones that were held).
class CopiedGate final : public AnswerGate {
 public:
  bool Hold(uint64_t key, int64_t version, Release release, std::vector<JoinedServer>* joined_now) override {
    versions_.push_back(version);
    *joined_now = {JoinedServer{1, "10.0.0.1:7000"}};
    return false;
  }
  std::vector<int64_t> versions_;
};

TEST_F(PushPullHandlerTest, AnAnswerAfterTheCopyNamesTheServersThatJoinedToo) {
  Configure(1);
  CopiedGate gate;
  StreamOptions options;
  options.catch_up = &gate;
  auto h = Handler(options);
  ASSERT_TRUE(Handle(*h, Request(v1::OP_PUSH_PULL, 0, 0), {0.5f, 0.5f}).ok());
  ASSERT_THAT(gate.versions_, ElementsAre(1));
  const std::vector<Answer> answers = sink_->answers();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.code(), 0) << answers[0].resp.message();
  EXPECT_THAT(answers[0].resp.joined_servers(), ElementsAre(1));
  EXPECT_THAT(answers[0].resp.joined_addresses(), ElementsAre("10.0.0.1:7000"));
  EXPECT_THAT(answers[0].data, ElementsAre(0.5f, 1.5f));
}

}  // namespace
}  // namespace dtrain::kv
