// How a shard store merges workers' pushes into a key, and when a pull can be answered:
// one class per rule. The store keeps the state, the locks and the arithmetic; a rule
// only decides. Sync and async today; bounded staleness (SSP) and replication are the
// next rules, each one more implementation rather than another branch in the store.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/kv/store_config.h"

namespace dtrain::kv {

// What a rule sees of one key and one worker when it decides. The store fills it in
// with the key's lock held and acts on the decision under the same lock.
struct KeyProgress {
  uint64_t key = 0;
  int64_t version = 0;            // updates applied so far
  int pending_count = 0;          // pushes held for step `version`, waiting for the rest
  bool worker_pending = false;    // this worker's push is among them
  int64_t worker_last_push = -1;  // the step of this worker's last accepted push; -1: none
  // SSP: this worker's push for the step being decided is already held ahead of the
  // key's version (a retry).
  bool worker_ahead = false;
};

// What the store does with a push that a rule accepts.
enum class PushAction {
  kIgnore,        // a retry of a push already counted: nothing changes, OK
  kStorePending,  // hold it until the step's other pushes arrive
  kApplyNow,      // run the optimizer on it alone, now
  kMergeStep,     // the step's last push: sum the held pushes and it in rank order,
                  // average, run the optimizer once
  kStoreAhead,    // SSP: a push for a later step than the key's version: hold it until
                  // that step's turn (then it counts as kStorePending / kMergeStep)
};

class MergeRule {
 public:
  virtual ~MergeRule() = default;

  // The fate of worker `worker_rank`'s push for `step` (the version its gradient was
  // computed on). An error refuses the push; the store returns it unchanged.
  virtual absl::StatusOr<PushAction> OnPush(const KeyProgress& key, int worker_rank, int64_t step) const = 0;

  // Whether a pull for `min_version` can be answered now; if not, the store parks it
  // until a push brings the key there, or its deadline passes.
  virtual bool CanAnswerPull(const KeyProgress& key, int64_t min_version) const = 0;
};

// For each key and step, exactly one push from every worker is merged; a pull waits
// for the step it asks for.
class SyncMergeRule final : public MergeRule {
 public:
  explicit SyncMergeRule(int num_workers) : num_workers_(num_workers) {}
  absl::StatusOr<PushAction> OnPush(const KeyProgress& key, int worker_rank, int64_t step) const override;
  bool CanAnswerPull(const KeyProgress& key, int64_t min_version) const override;

 private:
  const int num_workers_;
};

// Bounded staleness (SSP): steps merge as in sync, one push from every worker in rank
// order, but a worker may push up to `staleness` steps beyond the key's version (its
// pull after step t waited only for version t + 1 - staleness). Staleness 0 is sync.
class SspMergeRule final : public MergeRule {
 public:
  SspMergeRule(int num_workers, int staleness) : sync_(num_workers), staleness_(staleness) {}
  absl::StatusOr<PushAction> OnPush(const KeyProgress& key, int worker_rank, int64_t step) const override;
  bool CanAnswerPull(const KeyProgress& key, int64_t min_version) const override;

 private:
  const SyncMergeRule sync_;
  const int staleness_;
};

// Each push is applied on arrival; a pull gets the current weights at once.
class AsyncMergeRule final : public MergeRule {
 public:
  absl::StatusOr<PushAction> OnPush(const KeyProgress& key, int worker_rank, int64_t step) const override;
  bool CanAnswerPull(const KeyProgress& key, int64_t min_version) const override;
};

// The rule for `config.mode`.
std::unique_ptr<MergeRule> CreateMergeRule(const StoreConfig& config);

}  // namespace dtrain::kv
