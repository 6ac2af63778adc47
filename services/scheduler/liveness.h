// Who is alive, by when each node was last heard: the heartbeat deadline, deaths and
// their reasons, and how long a dead worker may take to come back. Knows nothing of
// gRPC or of ranks: each node's times are a plain LivenessRecord the caller keeps
// with the node, and every question is answered on the injected clock, so tests move
// time by hand.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/defaults.h"

namespace dtrain::scheduler {

using Clock = std::function<absl::Time()>;

// One node's liveness.
struct LivenessRecord {
  absl::Time last_heard = absl::InfinitePast();
  bool dead = false;
  absl::Time dead_at = absl::InfinitePast();  // with `dead`: when it was declared dead
  std::string death_reason;                   // with `dead`: "heartbeat stream broke", ...
};

struct LivenessOptions {
  // A node that sent nothing for this long is dead.
  absl::Duration heartbeat_timeout = absl::Seconds(kDefaultHeartbeatTimeoutSeconds);
  // How long a dead worker may take to come back (zero: a death is final).
  absl::Duration rejoin_timeout = absl::ZeroDuration();
  Clock clock;  // null: absl::Now
};

class Liveness {
 public:
  explicit Liveness(LivenessOptions options);

  absl::Time Now() const { return options_.clock(); }

  // The node spoke now.
  void Heard(LivenessRecord* node) const;
  // The node is dead from now on, for `why`.
  void Died(LivenessRecord* node, std::string why) const;
  // A dead node spoke again (it was paused, not gone): it is not dead any more.
  void Revived(LivenessRecord* node) const;
  // The node left the job: whatever it was, it is not dead.
  void Left(LivenessRecord* node) const { node->dead = false; }

  // The node's silence when it passed the heartbeat timeout, else nullopt. Silence
  // counts from its last word, and from no earlier than `counted_from` (a node blocked
  // in registration has nothing to say until the job starts).
  std::optional<absl::Duration> Overdue(const LivenessRecord& node,
                                        absl::Time counted_from = absl::InfinitePast()) const;

  // Whether deaths wait for a comeback at all (a rejoin timeout is set).
  bool RejoinAllowed() const { return options_.rejoin_timeout > absl::ZeroDuration(); }
  // A dead node still within the rejoin timeout (false when none is set).
  bool MayRejoin(const LivenessRecord& node) const;

  absl::Duration SinceHeard(const LivenessRecord& node) const { return Now() - node.last_heard; }
  absl::Duration SinceDeath(const LivenessRecord& node) const { return Now() - node.dead_at; }
  absl::Duration heartbeat_timeout() const { return options_.heartbeat_timeout; }
  absl::Duration rejoin_timeout() const { return options_.rejoin_timeout; }

 private:
  LivenessOptions options_;
};

// "3.2 s": how texts about liveness write a duration.
std::string SecondsText(absl::Duration d);

}  // namespace dtrain::scheduler
