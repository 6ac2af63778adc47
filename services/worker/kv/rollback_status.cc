// RollbackStatus / IsRollback (kvstore.h): a payload marks the ABORTED status, so a
// rollback is never mistaken for (or made from) another ABORTED error's text.
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {
namespace {
constexpr char kRollbackPayload[] = "type.dtrain.dev/rollback";
}  // namespace

absl::Status RollbackStatus(const std::string& reason) {
  absl::Status s = absl::AbortedError(reason);
  s.SetPayload(kRollbackPayload, absl::Cord("1"));
  return s;
}

bool IsRollback(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted && status.GetPayload(kRollbackPayload).has_value();
}

}  // namespace dtrain::worker
