// For the worker's kvstore tests: parameter servers in this process, each a
// kv::ShardStore (the store dtrain-server runs) reached through InProcessChannel, a
// ServerChannel that keeps the contract server_channel.h states without gRPC. Test
// support only: the product reaches servers over gRPC (PsClient), and the `local`
// kvstore uses a ShardStore directly, so nothing there needs a channel in-process.
//
// The channel drives the store as the server's PushPullHandler does: a compressed push
// is unpacked (its size checked against the key's) and checked finite before
// ShardStore::Push; a pull or push-pull parks in ShardStore::Pull / PullDelta with the
// channel's pull timeout as deadline, so a sync pull is answered once every worker's
// push of the step merged, or DEADLINE_EXCEEDED naming the missing workers. The
// server's once-a-second CheckDeadlines runs from the channel's waits instead.
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
#include "common/kv/shard_store.h"
#include "services/worker/cluster.h"
#include "services/worker/kv/dist_kvstore.h"
#include "services/worker/kv/server_channel.h"

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
  mutable absl::Mutex mu_;
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
  // (Cluster::rejoined); lives as long as the job.
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
