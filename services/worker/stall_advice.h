// Whether a run's waits for the other workers came from pauses that bounded staleness would
// have hidden, and what to type about it. A worker that stops for a while (a noisy
// neighbour, a garbage-collecting data loader, a preempted core) holds every other worker
// of a dist_sync job for the whole pause; with dist_ssp and a staleness of S steps the
// others go on for S steps meanwhile, so a pause shorter than S steps costs nothing. The
// slack must cover most of the pause, and nothing else tells the user how long the pauses
// were.
//
// Each step's blocked time (push + wait + pull) is compared with the run's median: a step
// blocked for more than kStallFactor typical steps longer than usual waited for a pause
// (a stall). At the end, when stalls cost a noticeable part of the run, Advice() names
// their share, their typical length in steps (90% of them are shorter) and a staleness
// of kCoverShare of that length. No LibTorch: the trainer hands in plain numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/kvstore_mode.h"

namespace dtrain::worker {

class StallAdvisor {
 public:
  // A step is a stall when its blocked time exceeds the median by this many median steps
  // (and by kMinStallSeconds).
  static constexpr double kStallFactor = 3.0;
  static constexpr double kMinStallSeconds = 0.05;
  // Advice only when stalls cost at least this share of the training time, over at least
  // kMinStalls of them (one slow checkpoint is not a pattern).
  static constexpr double kMinStallShare = 0.10;
  static constexpr int kMinStalls = 3;
  // The staleness advised covers this share of a pause, not all of it. A worker keeps the
  // lead it took through another's pause until a pause of its own, and a second pause of
  // the other on top adds to it; its pushes count 1/(1 + lead) (kv/stale_weight.h), so
  // the last steps of a long lead buy speed with pushes that hardly count. LeNet under
  // 0.6 s pauses of every worker (tests/bench/straggler_pauses.sh, docs/tuning.md) ended
  // 2.3 points below dist_sync on average with a staleness covering the whole pause,
  // 1.3 points below with three quarters of it, and no slower.
  static constexpr double kCoverShare = 0.75;
  // The advice covers the last this many steps (1 MiB of figures), so that a long run's
  // memory stays bounded.
  static constexpr size_t kWindowSteps = 65536;

  // One step: `compute` seconds of forward and backward, `blocked` seconds in the kvstore.
  void StepDone(double compute, double blocked);

  // `mode` and `staleness` as the run was given them. Empty when there is nothing to
  // say: no stalls worth it, or a mode that never waits for others (local, device,
  // dist_async). Under dist_ssp a stall is the part of a pause beyond the slack, so the
  // pause is the given staleness plus the stalls' length in steps; nothing is advised
  // when the staleness already covers kCoverShare of it. `weigh_stale` as the run was
  // given it (--no-weigh-stale: false), for what the advice says of stale pushes.
  std::optional<std::string> Advice(KVStoreMode mode, int64_t staleness, bool weigh_stale = true) const;

 private:
  std::vector<double> compute_, blocked_;  // a ring of at most kWindowSteps
  size_t next_ = 0;                        // where the next step goes once the ring is full
};

}  // namespace dtrain::worker
