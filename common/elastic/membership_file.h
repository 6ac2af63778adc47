// The membership schedule on disk: PREFIX-membership.json (written on every change
// and with each checkpoint) and the file --replay-membership reads (docs/elastic.md).
//
//   {"format": "dtrain-membership-1", "min_workers": 2, "max_workers": 4,
//    "generations": [
//     {"from_step": 0, "workers": [0,1]},
//     {"from_step": 180, "workers": [0,1,2]}
//    ]}
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/elastic/membership_schedule.h"

namespace dtrain::elastic {

inline constexpr char kMembershipFormat[] = "dtrain-membership-1";
// A schedule file larger than this is refused before it is read whole.
inline constexpr size_t kMaxMembershipFileBytes = 16 << 20;

// The JSON text above, one generation a line, ending in a newline.
std::string MembershipToJson(const MembershipSchedule& schedule);

// The schedule `text` holds. INVALID_ARGUMENT naming where it breaks: "line 3, column
// 14: ..." for text that is not JSON, the field ("generations[1].workers[0]: expected
// an integer, got \"a\"") for a wrong shape, or the schedule rule it breaks
// (MembershipSchedule::Create's texts). Unknown fields are refused too: a misspelt one
// would otherwise change nothing silently.
absl::StatusOr<MembershipSchedule> ParseMembershipJson(absl::string_view text);

// Writes `schedule` to `path` atomically (WriteFileAtomically): a reader sees the old
// file or the new one, never half of one.
absl::Status WriteMembershipFile(const std::string& path, const MembershipSchedule& schedule);

// PREFIX-0003.membership.json: the membership a resume of checkpoint `epoch` (MXNet's
// number, the epochs done) starts with (MembershipSchedule::ResumedAt), written by the
// worker that writes the checkpoint, before its parameters.
std::string CheckpointMembershipPath(const std::string& prefix, int epoch);

// Reads and parses `path`; errors start with the path.
absl::StatusOr<MembershipSchedule> ReadMembershipFile(const std::string& path);

}  // namespace dtrain::elastic
