// Matches the keys of a saved PREFIX-N.states file to the keys a store initialises,
// so that a resume restores every key's optimizer state exactly once and refuses a
// file that was written for a different model or optimizer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"

namespace dtrain::worker {

class ResumeIndex {
 public:
  // Fresh start: Take leaves version and state untouched.
  ResumeIndex() = default;

  // Moves the saved version and state of `key` out. NOT_FOUND-style
  // FAILED_PRECONDITION when resuming and the file has no such key.
  absl::Status Take(uint64_t key, int64_t* version, std::vector<float>* state);
  // FAILED_PRECONDITION when the file held keys nobody took (a different model).
  absl::Status CheckAllUsed() const;

 private:
  friend absl::StatusOr<ResumeIndex> IndexResumeStates(const checkpoint::OptimizerStates*, const std::string&);
  bool resuming_ = false;
  std::map<uint64_t, kv::KeyState> records_;
};

// `k` without its weights, as a .states file holds it (the weights go to .params).
kv::KeyState StateOnly(kv::KeyState k);

// `states` may be null (fresh start). FAILED_PRECONDITION when the saved optimizer
// differs from `optimizer` or a key repeats.
absl::StatusOr<ResumeIndex> IndexResumeStates(const checkpoint::OptimizerStates* states, const std::string& optimizer);

}  // namespace dtrain::worker
