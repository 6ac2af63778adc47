// When a node's step changed, for sampling it at a moment just past: the
// heartbeat thread wakes a little after each shared tick, by which time a fast worker
// may have moved on; StepAt(tick) gives the step it had at the tick itself, so that
// the scheduler compares the workers' steps of one moment (WorkerLag). Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace dtrain {

class StepHistory {
 public:
  // The step is `step` from `now_unix_ms` on (a repeat of the current step is ignored).
  void Set(int64_t step, int64_t now_unix_ms) {
    absl::MutexLock lock(&mu_);
    if (count_ > 0 && entries_[(next_ + kKept - 1) % kKept].step == step) return;
    entries_[next_] = {now_unix_ms, step};
    next_ = (next_ + 1) % kKept;
    if (count_ < kKept) ++count_;
  }

  // The step at `unix_ms`: the newest change at or before it. nullopt when every change
  // kept is later (more than kKept steps since then) or there is none.
  std::optional<int64_t> StepAt(int64_t unix_ms) const {
    absl::MutexLock lock(&mu_);
    for (size_t i = 1; i <= count_; ++i) {
      const Entry& e = entries_[(next_ + kKept - i) % kKept];
      if (e.since_unix_ms <= unix_ms) return e.step;
    }
    return std::nullopt;
  }

 private:
  static constexpr size_t kKept = 256;
  struct Entry {
    int64_t since_unix_ms = 0;
    int64_t step = 0;
  };
  mutable absl::Mutex mu_;
  std::array<Entry, kKept> entries_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dtrain
