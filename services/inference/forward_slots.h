// Bounds how many forwards run at once.
//
// gRPC's sync server gives every call its own thread, and a thread limit would turn
// extra calls into RESOURCE_EXHAUSTED; so calls are admitted freely and wait here, each
// until its own deadline, for one of N slots. N forwards at a time keep the cores busy
// without every request's activations living in memory together. Slots go to waiters
// first come, first served, which keeps the latency tail short under load. The mutex
// guards the counter and the queue only; no lock is held while a model runs.
#pragma once

#include <cstdint>
#include <deque>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dtrain::inference {

class ForwardSlots {
 public:
  explicit ForwardSlots(int slots) : free_(slots > 0 ? slots : 1) {}

  // Holds a slot until destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : slots_(other.slots_) { other.slots_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (slots_ != nullptr) slots_->Release();
    }

   private:
    friend class ForwardSlots;
    explicit Lease(ForwardSlots* slots) : slots_(slots) {}
    ForwardSlots* slots_;
  };

  // A slot, or DEADLINE_EXCEEDED once `deadline` passes with all of them busy or taken
  // by earlier callers.
  absl::StatusOr<Lease> Acquire(absl::Time deadline);

 private:
  void Release();

  absl::Mutex mu_;
  int free_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> waiting_ ABSL_GUARDED_BY(mu_);  // tickets, oldest first
};

}  // namespace dtrain::inference
