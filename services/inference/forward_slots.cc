#include "services/inference/forward_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dtrain::inference {

absl::StatusOr<ForwardSlots::Lease> ForwardSlots::Acquire(absl::Time deadline) {
  const absl::Time start = absl::Now();
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  waiting_.push_back(ticket);
  auto my_turn = [this, ticket]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return free_ > 0 && waiting_.front() == ticket; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&my_turn), deadline)) {
    // Leaving the queue may put someone else at its front; the mutex re-checks their
    // conditions on unlock.
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
    return absl::DeadlineExceededError(absl::StrCat("deadline passed after waiting ",
                                                    absl::FormatDuration(absl::Now() - start),
                                                    " for a free inference slot (every --threads slot busy)"));
  }
  waiting_.pop_front();
  --free_;
  return Lease(this);
}

void ForwardSlots::Release() {
  absl::MutexLock lock(&mu_);
  ++free_;
}

}  // namespace dtrain::inference
