// One key's pulls that wait for a version the key has not reached: parked with their
// deadlines, answered once a merge brings the key there, failed when their deadline
// passes, their stream goes or the key is rolled back. A part of the shard store's key
// (key_entry.h): the store holds the key's lock around every call, and these only
// keep the queue and say why a pull failed; the store decides when.
//
// Every pull taken out of the queue has its callback run exactly once, in parking
// order, while it is still in the queue; a callback must not call back into the store.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/kv/shard_store.h"

namespace dtrain::kv {

// A pull waiting for the key to reach `min_version`.
struct ParkedPull {
  int worker_rank;
  int64_t min_version;
  absl::Time parked_at;
  absl::Time deadline;
  PullAnswerCallback done;
  uint64_t owner = 0;  // see ShardStore::DropPulls
  PullMode mode = PullMode::kAtLeast;
  int64_t held_version = -1;  // ShardStore::PullDelta's; -1: a plain pull
};

class ParkedPulls {
 public:
  bool empty() const { return pulls_.empty(); }
  int64_t size() const { return static_cast<int64_t>(pulls_.size()); }

  void Park(ParkedPull pull) { pulls_.push_back(std::move(pull)); }

  // Takes out every pull that `version` satisfies (min_version <= version) and runs
  // `answer` on each. Returns how many.
  int64_t TakeReady(int64_t version, const std::function<void(const ParkedPull&)>& answer);

  // Fails every pull `match` selects with `why` (the answer names `version`, the key's
  // current one) and forgets it. Returns how many.
  int64_t Drop(const std::function<bool(const ParkedPull&)>& match, const absl::Status& why, int64_t version);

  // Fails every pull with `why`. Returns how many.
  int64_t FailAll(const absl::Status& why, int64_t version);

  // Fails, DEADLINE_EXCEEDED, the pulls whose deadline is not after `now`:
  // "step 812 key 3: waiting for worker 2 (last heard 31 s ago); worker 0's pull of
  // version 813 timed out after 120 s". `step` is the key's version; `waiting_for`
  // names the workers whose pushes are missing (called at most once, only when a
  // pull expires). Returns how many.
  int64_t Expire(absl::Time now, int64_t step, uint64_t key, const std::function<std::string()>& waiting_for);

 private:
  // Runs `fail(pull)` on every pull `leave` selects, in parking order, then forgets
  // them. Returns how many.
  int64_t Remove(const std::function<bool(const ParkedPull&)>& leave,
                 const std::function<void(const ParkedPull&)>& fail);

  std::vector<ParkedPull> pulls_;  // in parking order
};

}  // namespace dtrain::kv
