// The arithmetic of one key's update, private to the shard store (which holds the
// key's lock around each call and counts the updates): the mean of a step's pushes,
// and the optimizer run on it with whatever the key keeps beside its weights (the
// previous version, the pull compression's packed change).
#pragma once

#include "absl/base/thread_annotations.h"
#include "common/kv/key_entry.h"
#include "common/kv/store_setup.h"

namespace dtrain::kv {

// The mean of the pending pushes of every one of the step's workers (ranks 0 ..
// num_workers - 1, or s.step_ranks' for the key's version), summed in rank order
// (bit-reproducible whatever the arrival order). The last push to arrive (`last_rank`,
// `last_grad`; -1: none) is read in place rather than stored: with one worker nothing
// is copied and its push is the mean. Points into the key (or at `last_grad`), valid
// until the key's next update.
const float* MeanGradient(const StoreSetup& s, KeyEntry& k, int last_rank, const float* last_grad)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu);

// Runs the optimizer on `grad` and advances the key's version by one. With a previous
// version kept, the old weights become it; with pull compression, the weights move by
// exactly their packed change (packed_change.h).
void UpdateKey(const StoreSetup& s, KeyEntry& k, const float* grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu);

}  // namespace dtrain::kv
