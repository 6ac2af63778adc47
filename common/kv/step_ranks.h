// Which worker ranks merge each step, for a store whose workers change while the job
// runs (docs/elastic.md; implemented by elastic::MembershipGate). A store without one
// merges every step from ranks 0 .. num_workers - 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::kv {

// Thread-safe: read under a key's lock by every push it decides.
class StepRanks {
 public:
  virtual ~StepRanks() = default;
  // The ranks (ascending, not empty) whose pushes step `step` merges.
  virtual std::vector<int> RanksAt(int64_t step) const = 0;
  virtual int CountAt(int64_t step) const = 0;
  virtual bool Holds(int64_t step, int rank) const = 0;
  // "generation 1 from step 180, workers {0,1,3}": what refusals name.
  virtual std::string DescribeAt(int64_t step) const = 0;
};

}  // namespace dtrain::kv
