// MembershipChangedStatus (kvstore.h) and how an elastic job's servers answer a push
// during a membership change (membership_status.h): a payload marks the ABORTED
// status and carries the step, so that neither is read back from an error's text.
#include "services/worker/kv/membership_status.h"

#include <algorithm>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {
namespace {
constexpr char kMembershipPayload[] = "type.dtrain.dev/membership-changed";
}  // namespace

absl::Status MembershipChangedStatus(int64_t step, const std::string& reason) {
  absl::Status s = absl::AbortedError(reason);
  s.SetPayload(kMembershipPayload, absl::Cord(std::to_string(step)));
  return s;
}

bool IsMembershipChanged(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted && status.GetPayload(kMembershipPayload).has_value();
}

int64_t MembershipChangedStep(const absl::Status& status) {
  if (!IsMembershipChanged(status)) return -1;
  int64_t step = -1;
  if (!absl::SimpleAtoi(std::string(*status.GetPayload(kMembershipPayload)), &step)) return -1;
  return step;
}

// The servers' texts are MembershipGate::AdmitPush's and the server's own ("this server
// has not had its elastic job's membership from the scheduler yet; retry"), behind
// what a channel puts before them ("server 1 at HOST:PORT: push-pull of key 3: ...").
// No transport error names a membership.
bool IsMembershipChangeAnswer(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted && absl::StrContains(status.message(), "membership changed");
}

bool IsMembershipPending(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable && absl::StrContains(status.message(), "membership");
}

absl::Duration HeldPushPause(uint64_t attempt, uint64_t salt) {
  // Spread over 20..50 ms so that the workers held by one change do not retry in step.
  uint64_t x = (attempt + 1) * 0x9E3779B97F4A7C15ULL ^ salt;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return kHeldPushPauseMin + absl::Milliseconds(static_cast<int64_t>(x % 31));
}

}  // namespace dtrain::worker
