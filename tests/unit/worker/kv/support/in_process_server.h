// For the worker's kvstore tests: parameter servers in this process, each a
// kv::ShardStore (the store dtrain-server runs) reached through InProcessChannel, a
// ServerChannel that keeps the contract server_channel.h states without gRPC. Test
// support only: the product reaches servers over gRPC (PsClient), and the `local`
// kvstore uses a ShardStore directly, so nothing there needs a channel in-process.
//
// The channel runs the server's own request path: it builds each request as PsClient
// does (services/worker/kv/key_request_proto.h), hands it to a kv::PushPullHandler
// (what the server's PushPull stream runs) with the options dtrain-server gives its
// streams, and reads the handler's answers as PsClient reads them off the wire. What
// stays here is what only a process or a transport has: the ShardStore, the server's
// once-a-second CheckDeadlines (run from the channel's waits), a stream the server
// closes after a refusal, and a killed process. The control calls (Configure, InitKeys,
// GetState, GetVersions) go the same way: built and read as PsClient does
// (control_request_proto.h), answered by the server's own ControlHandler.
// in_process_parity_test.cc runs the same requests, unary ones included, through this
// channel and through PsClient against the gRPC service and compares the answers byte
// for byte.
//
// Every time is read from the clock the servers were made with, so a test may hand a
// clock that moves on by itself (TickingClock) and a 2 minute sync timeout passes in
// milliseconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv/push_pull_handler.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/scheduler.pb.h"
#include "services/worker/cluster.h"
#include "services/worker/kv/dist_kvstore.h"
#include "services/worker/kv/server_channel.h"

namespace dtrain::server {
class ControlHandler;
class SnapshotRollback;
class SnapshotWriter;
}  // namespace dtrain::server

namespace dtrain::worker::testing {

using Clock = std::function<absl::Time()>;

// A clock that moves on by `tick` every time it is read: waits on it end after a
// number of readings rather than of real seconds. Thread-safe.
class TickingClock {
 public:
  explicit TickingClock(absl::Duration tick, absl::Time start = absl::UnixEpoch() + absl::Hours(1))
      : tick_ns_(absl::ToInt64Nanoseconds(tick)), now_ns_(absl::ToUnixNanos(start)) {}
  absl::Time Now() { return absl::FromUnixNanos(now_ns_.fetch_add(tick_ns_, std::memory_order_relaxed)); }
  Clock AsClock() {
    return [this] { return Now(); };
  }

 private:
  const int64_t tick_ns_;
  std::atomic<int64_t> now_ns_;
};

class InProcessServer {
 public:
  // `sync_timeout`: how long a parked pull waits when the channel set no pull timeout
  // (dtrain-server --sync-timeout).
  InProcessServer(int rank, Clock clock = absl::Now, absl::Duration sync_timeout = absl::Seconds(120));
  ~InProcessServer();  // channels must be gone first
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;

  int rank() const { return rank_; }
  const std::string& address() const { return address_; }  // "inprocess:RANK"
  kv::ShardStore& store() { return store_; }
  // What answers the control calls, as dtrain-server's PsService has it answer them
  // (its default flags, no replication).
  const dtrain::server::ControlHandler& control() const { return *control_; }

  // Replication: the gate dtrain-server's ReplicaCatchUp is (answers held until a
  // restarted chain member holds the key, then naming it). Set before the first
  // Connect; `gate` must outlive the channels.
  void SetAnswerGate(kv::AnswerGate* gate) { gate_ = gate; }
  // The options of every PushPull stream (channel) to this server, as dtrain-server
  // sets them from its flags.
  kv::StreamOptions stream_options() const;

  // Snapshots and rollback (docs/recovery.md), with dtrain-server's own classes: every
  // `every` steps the shard is written to `dir`. Call before the store is configured.
  void EnableSnapshots(const std::string& dir, int64_t every);
  // The steps of the complete snapshots on disk, newest first, once the writer's
  // thread wrote what was due (it waits up to `timeout` of real time for it).
  std::vector<int64_t> CompleteSnapshots(absl::Duration timeout = absl::Seconds(10));
  // The scheduler's rollback order reaches this server: it reloads its snapshot of
  // `order.step()`. OK once it acknowledged the order; else what went wrong.
  absl::Status Rollback(const v1::RollbackOrder& order);

  // A channel of worker `worker_rank`, as PsClient::Connect: once the server was
  // killed, UNAVAILABLE, or with a zero timeout a channel that fails every request so.
  absl::StatusOr<std::unique_ptr<ServerChannel>> Connect(int worker_rank, absl::Duration connect_timeout);
  // The server process dies: every channel to it fails what is outstanding and
  // everything later UNAVAILABLE ("stream broke"), as a broken gRPC stream does.
  void Kill();
  bool killed() const;

  // For the channels: the clock, the default pull timeout, and registering themselves
  // so that Kill reaches them.
  const Clock& clock() const { return clock_; }
  absl::Duration sync_timeout() const { return sync_timeout_; }
  class Link {
   public:
    virtual ~Link() = default;
    virtual void Break(const absl::Status& why) = 0;
  };
  void Register(Link* link);
  void Unregister(Link* link);

 private:
  const int rank_;
  const std::string address_;
  const Clock clock_;
  const absl::Duration sync_timeout_;
  kv::ShardStore store_;
  std::unique_ptr<dtrain::server::ControlHandler> control_;
  kv::AnswerGate* gate_ = nullptr;
  std::unique_ptr<dtrain::server::SnapshotWriter> snapshots_;
  std::unique_ptr<dtrain::server::SnapshotRollback> rollback_;
  mutable absl::Mutex mu_;
  v1::SnapshotReport report_ ABSL_GUARDED_BY(mu_);
  bool killed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Link*> links_ ABSL_GUARDED_BY(mu_);
};

// `n` servers, ranks 0..n-1, and the ChannelFactory DistKVStore connects through (it
// finds the server by address).
class InProcessServers {
 public:
  InProcessServers(int n, Clock clock = absl::Now, absl::Duration sync_timeout = absl::Seconds(120));
  InProcessServer& server(int rank) { return *servers_[static_cast<size_t>(rank)]; }
  int size() const { return static_cast<int>(servers_.size()); }
  std::vector<ServerEndpoint> endpoints() const;
  ChannelFactory factory();

 private:
  std::vector<std::unique_ptr<InProcessServer>> servers_;
};

// Workers of one job in this process (threads): each its own Cluster of `num_workers`
// with a barrier all of them share. Nobody is dead, nothing rolls back.
class FakeJob {
 public:
  FakeJob(int num_workers, std::vector<ServerEndpoint> servers);
  ~FakeJob();
  // Worker `rank`'s view; lives as long as the job.
  Cluster& worker(int rank);
  // A process that took rank `rank` over after the job started, replacing a dead one
  // (ClusterRecovery::rejoined); lives as long as the job.
  Cluster& replacement(int rank);
  // Ends the job (JobStatus ABORTED with `why`) for every worker.
  void End(const std::string& why);

 private:
  class Member;
  friend class Member;
  absl::Status Barrier(const std::string& name, absl::Duration timeout);
  absl::Status Status() const;

  const int num_workers_;
  const std::vector<ServerEndpoint> servers_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Member>> members_ ABSL_GUARDED_BY(mu_);
  std::string ended_ ABSL_GUARDED_BY(mu_);
  // Barrier rounds: how many arrived at the current one, and how many completed.
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dtrain::worker::testing
