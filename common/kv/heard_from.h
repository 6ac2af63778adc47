// When each worker was last heard from, for the texts that name whom a step waits for:
// "worker 2 (last heard 31 s ago)". Thread-safe without a lock: one atomic per worker,
// fixed at construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dtrain::kv {

class HeardFrom {
 public:
  explicit HeardFrom(int num_workers);

  // Worker `w` (0 <= w < num_workers) was heard from at `now`. Returns whether it was
  // the first time.
  bool Note(int w, absl::Time now);

  // "worker 2 (last heard 31 s ago)" or "worker 2 (never heard from)", at `now`.
  std::string Text(int w, absl::Time now) const;
  // Text of each of `workers`, joined by ", ".
  std::string Texts(const std::vector<int>& workers, absl::Time now) const;

 private:
  // Unix nanos of the last message; 0: never.
  std::unique_ptr<std::atomic<int64_t>[]> last_;
};

}  // namespace dtrain::kv
