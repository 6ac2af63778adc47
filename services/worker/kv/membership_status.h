// How a worker reads an elastic job's servers' answers to a push during a membership
// change (docs/elastic.md, common/elastic/membership_gate.h):
//   UNAVAILABLE "membership change to generation 3 pending ...; retry" (or "membership
//     generation 3 is not committed on this server yet"): the push is held; the
//     worker sends it again after HeldPushPause, up to its sync timeout;
//   ABORTED "membership changed from step S: generation g, workers {..}": the step must
//     be redone in the new generation (MembershipChangedStatus, kvstore.h).
// Only these texts count: a broken stream's UNAVAILABLE is a dead server, as before.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dtrain::worker {

bool IsMembershipPending(const absl::Status& status);
bool IsMembershipChangeAnswer(const absl::Status& status);

inline constexpr absl::Duration kHeldPushPauseMin = absl::Milliseconds(20);
inline constexpr absl::Duration kHeldPushPauseMax = absl::Milliseconds(50);
// The pause before sending a held push again the `attempt`-th time (0, 1, ...): in
// [kHeldPushPauseMin, kHeldPushPauseMax], spread by `salt` (the worker's rank and key).
absl::Duration HeldPushPause(uint64_t attempt, uint64_t salt);

}  // namespace dtrain::worker
