// The parameter servers as the elastic coordinator sees them (ServerGates), reached
// through their heartbeat streams (docs/elastic.md "Changing the membership"): the
// scheduler has no RPC to a server, so an order waits here until the server's next
// heartbeat carries it out (HeartbeatResponse.membership_order), and the server's
// answer comes back in a later heartbeat (HeartbeatRequest.membership). Until then
// Propose and Commit answer UNAVAILABLE, and the coordinator, called again on every
// heartbeat round, asks again: the calls are idempotent on both sides.
//
// gRPC-free and thread-safe (the heartbeat streams and the ticker call it).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dtrain/v1/scheduler.pb.h"
#include "services/scheduler/elastic_coordinator.h"

namespace dtrain::scheduler {

class HeartbeatGates final : public ServerGates {
 public:
  explicit HeartbeatGates(int num_servers);

  int num_servers() const override { return num_servers_; }
  // Issues the proposal to `server` (replacing any order before it) and returns its
  // answer once the server's report answers it (or reports that generation committed). UNAVAILABLE "waiting for server
  // 1's answer to the proposal of generation 3" until then; FAILED_PRECONDITION with the server's error when it refused
  // the order.
  absl::StatusOr<elastic::MembershipGate::Proposal> Propose(int server, int generation, int64_t not_before) override;
  // The same for the commit; FAILED_PRECONDITION when the server committed another step.
  absl::Status Commit(int server, int generation, const elastic::Generation& next, bool drop_pending) override;

  // Gives up `server`'s proposal of `generation` (one a restarted scheduler finds and no
  // server committed): UNAVAILABLE until the server's report answers it.
  absl::Status Abort(int server, int generation);

  // Server `server`'s report, from the heartbeat of its process `incarnation`. A new
  // process of the rank (a restarted server) forgets the old one's answers: it builds
  // its gate anew (RegisterResponse.membership), so the orders go to it again.
  void Report(int server, uint64_t incarnation, const v1::MembershipReport& report);
  // A heartbeat without a report from `incarnation`: the last report stands, unless
  // it came from an older process.
  void Heard(int server, uint64_t incarnation);
  // The order to put on the server's heartbeat response: the last one issued to it,
  // until its report answers it; nullopt when there is none to send.
  std::optional<v1::MembershipOrder> OrderFor(int server) const;
  // The server's last report; nullopt before its first heartbeat of the job.
  std::optional<v1::MembershipReport> LastReport(int server) const;

 private:
  struct Server {
    std::optional<v1::MembershipOrder> order;  // the last order issued
    std::optional<v1::MembershipReport> report;
    uint64_t incarnation = 0;  // of the process that sent `report`
  };
  // Whether `report` answers `order`: the same generation and phase.
  static bool Answers(const std::optional<v1::MembershipReport>& report, const v1::MembershipOrder& order);
  // Makes `order` the server's order (a different one replaces it) and returns its
  // answer, or UNAVAILABLE (`what`: "the proposal", "the commit") while there is none.
  absl::StatusOr<v1::MembershipReport> Ask(int server, const v1::MembershipOrder& order, const char* what);

  const int num_servers_;
  mutable absl::Mutex mu_;
  std::vector<Server> servers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtrain::scheduler
