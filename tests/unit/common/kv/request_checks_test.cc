// ValidatePushPullRequest: every field a client sets is checked, and the error names
// the request and the field.
#include "common/kv/request_checks.h"

#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

v1::PushPullRequest GoodPush() {
  v1::PushPullRequest r;
  r.set_request_id(7);
  r.set_op(v1::OP_PUSH);
  r.set_worker_rank(1);
  r.set_step(4);
  r.set_key(3);
  r.set_dtype(v1::DTYPE_FLOAT32);
  return r;
}

v1::PushPullRequest GoodPull() {
  v1::PushPullRequest r = GoodPush();
  r.set_op(v1::OP_PULL);
  r.set_step(0);
  r.set_min_version(5);
  r.set_timeout_ms(1000);
  return r;
}

std::string Error(const v1::PushPullRequest& r, int64_t payload_bytes = -1, const RequestLimits& limits = {}) {
  const absl::Status s = ValidatePushPullRequest(r, payload_bytes, limits);
  if (s.ok()) return "OK";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(RequestChecksTest, WellFormedRequestsPass) {
  EXPECT_EQ(Error(GoodPush(), 16), "OK");
  EXPECT_EQ(Error(GoodPull()), "OK");
  v1::PushPullRequest pp = GoodPush();
  pp.set_op(v1::OP_PUSH_PULL);
  EXPECT_EQ(Error(pp, 0), "OK");
}

TEST(RequestChecksTest, NegativeStepIsRefusedNotIgnored) {
  v1::PushPullRequest r = GoodPush();
  r.set_step(-1);
  EXPECT_EQ(Error(r, 16), "push of key 3 by worker 1: step -1 is negative (steps count from 0)");
  r.set_op(v1::OP_PUSH_PULL);
  EXPECT_EQ(Error(r, 16), "push-pull of key 3 by worker 1: step -1 is negative (steps count from 0)");
}

TEST(RequestChecksTest, NegativeRankVersionAndTimeoutAreRefused) {
  v1::PushPullRequest r = GoodPull();
  r.set_worker_rank(-2);
  EXPECT_EQ(Error(r), "pull of key 3 by worker -2: worker_rank -2 is negative");
  r = GoodPull();
  r.set_min_version(-1);
  EXPECT_EQ(Error(r), "pull of key 3 by worker 1: min_version -1 is negative");
  r = GoodPull();
  r.set_timeout_ms(-5);
  EXPECT_EQ(Error(r), "pull of key 3 by worker 1: timeout_ms -5 is negative (0: the server's --sync-timeout)");
  r = GoodPull();
  r.set_timeout_ms(int64_t{1} << 62);
  RequestLimits limits;
  limits.max_timeout_ms = 1000;
  EXPECT_EQ(Error(r, -1, limits), "pull of key 3 by worker 1: timeout_ms 4611686018427387904 is over the cap of 1000");
}

TEST(RequestChecksTest, UnknownOpAndDtypeAreRefused) {
  v1::PushPullRequest r = GoodPush();
  r.set_op(static_cast<v1::Op>(42));
  EXPECT_EQ(Error(r), "request 7: unknown op 42 (want OP_PUSH, OP_PULL or OP_PUSH_PULL)");
  r = GoodPush();
  r.set_dtype(static_cast<v1::DType>(9));
  EXPECT_EQ(Error(r, 16), "key 3: dtype must be DTYPE_FLOAT32, got unknown (9)");
  r.set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(Error(r, 16), "key 3: dtype must be DTYPE_FLOAT32, got DTYPE_UNSPECIFIED (0)");
  EXPECT_EQ(Error(GoodPull()), "OK") << "a pull may leave dtype unset";
}

TEST(RequestChecksTest, PayloadSizesAreChecked) {
  EXPECT_EQ(Error(GoodPush(), 10), "push of key 3: data has 10 bytes, not a whole number of float32s");
  EXPECT_EQ(Error(GoodPull(), 4), "pull of key 3 carries 4 bytes of data; only pushes do");
  RequestLimits limits;
  limits.max_payload_bytes = 8;
  EXPECT_EQ(Error(GoodPush(), 12, limits), "push of key 3 by worker 1: data has 12 bytes, over the cap of 8");
}

TEST(RequestChecksTest, ExactVersionIsForPullsOnly) {
  v1::PushPullRequest r = GoodPull();
  r.set_exact_version(true);
  EXPECT_EQ(Error(r), "OK");
  r = GoodPush();
  r.set_exact_version(true);
  EXPECT_EQ(Error(r, 16),
            "push of key 3 by worker 1: exact_version is for pulls (a push-pull waits for the version after its step)");
  r.set_op(v1::OP_PUSH_PULL);
  EXPECT_EQ(Error(r, 16),
            "push-pull of key 3 by worker 1: exact_version is for pulls (a push-pull waits for the "
            "version after its step)");
}

}  // namespace
}  // namespace dtrain::kv
