// The shard store's periodic "still waiting" lines: keys whose step stalls, grouped by
// step, each step one line naming its first key, how many more, and every worker
// missing from any of them: "step 812 key 3 (+4 more keys): still waiting for worker 2
// (last heard 31 s ago)".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/kv/heard_from.h"

namespace dtrain::kv {

class StallReport {
 public:
  explicit StallReport(int num_workers) : num_workers_(num_workers) {}

  // Key `key` stalls at `step`, waiting for `missing` (ranks below num_workers). Keys
  // are added in the order the first of each step is named by.
  void Add(int64_t step, uint64_t key, const std::vector<int>& missing);

  bool empty() const { return steps_.empty(); }

  // One line per step, ascending, the workers named as `heard` has them at `now`.
  std::vector<std::string> Lines(const HeardFrom& heard, absl::Time now) const;

 private:
  struct Stall {
    uint64_t first_key = 0;
    int64_t num_keys = 0;
    std::vector<bool> missing;  // by rank
  };
  const int num_workers_;
  std::map<int64_t, Stall> steps_;
};

}  // namespace dtrain::kv
