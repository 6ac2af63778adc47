// Replication (docs/recovery.md, "Servers: replication and failover"): brings a
// restarted server, which starts empty, back into the chains of the keys it
// replicates, while training goes on.
//
// Every live member of a key's chain that hears (from the scheduler) that a member
// restarted copies the key's full state (weights, optimizer state, version) to it the
// next time the key moves to a new version, and holds that version's answers until the
// copy is in; the answers then name the newcomer (PushPullResponse.joined_servers).
// Why that is exact: the first answer of version v goes out only after the copy, and
// every answer of v after it names the newcomer too (held ones when they are released,
// later ones at once: a worker whose pull arrives once the copy is done), so every
// worker learns "the newcomer holds the key from v" in the answer it waits for before
// it sends its step-v push, and includes the newcomer from step v on. No worker
// pushes step v before it has its answer of version v, so the key cannot move past v
// while the copy runs. Two members copying the same version copy the same bits; a
// second copy is a no-op (InitKey keeps an existing key).
//
// gRPC-free apart from the copy itself (a Configure and an InitKeys to the newcomer).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/kv/shard_store.h"
#include "common/kv/push_pull_handler.h"
#include "services/server/server_metrics.h"
#include "dtrain/v1/parameter_server.pb.h"

namespace dtrain::server {

class ReplicaCatchUp final : public kv::AnswerGate {
 public:
  // `store` (and `metrics`, null: none) must outlive this. Starts the copying thread.
  ReplicaCatchUp(kv::ShardStore* store, int my_rank, ServerMetrics* metrics = nullptr);
  ~ReplicaCatchUp();  // stops the thread; held answers are released without a join

  // From Configure: what a newcomer is configured with before its first key.
  void NoteConfigure(const v1::ConfigureRequest& req);
  // From InitKeys: the chain of `key` (KeyInit.chain; empty: not replicated).
  void NoteChain(uint64_t key, const std::vector<int>& chain);
  // From the scheduler's heartbeat: server `rank` came back at `address`, empty.
  void ServerRestarted(int rank, const std::string& address);

  // AnswerGate: an answer of a key whose chain has a newcomer not yet holding it waits
  // for the copy; `release` then runs on the copying thread. Answers of a version whose
  // copy is done go at once, naming the newcomers in `*joined_now`.
  bool Hold(uint64_t key, int64_t version, Release release, std::vector<kv::JoinedServer>* joined_now) override;

 private:
  struct Gate {
    int64_t answered = -1;  // highest version answered (or held)
    int64_t copying = -1;   // version being copied; -1: none
    std::vector<Release> held;
    // The last copy that is done: its version and whom it reached. Every answer of
    // that version names them, not only those the copy held.
    int64_t joined_version = -1;
    std::vector<kv::JoinedServer> joined;
    std::vector<int> chain;
  };
  struct Job {
    uint64_t key;
    int64_t version;
    std::vector<kv::JoinedServer> to;
    absl::Time held_since;
  };
  void Loop();
  void Run(const Job& job);
  // Sends the key's state to `to`; OK once it holds it.
  absl::Status CopyTo(const kv::JoinedServer& to, const kv::KeyState& state, const std::vector<int>& chain);

  kv::ShardStore* store_;
  const int my_rank_;
  ServerMetrics* metrics_;
  // Newcomers not yet holding every key of ours their chain includes (fast path: 0).
  std::atomic<int> pending_{0};
  std::atomic<bool> replicated_{false};  // some key has a chain (else Hold returns at once)
  std::atomic<bool> sync_{false};        // configured dist_sync (catch-up needs steps)
  absl::Mutex mu_;
  std::map<uint64_t, Gate> gates_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> newcomers_ ABSL_GUARDED_BY(mu_);      // rank -> address
  std::map<int, std::set<uint64_t>> copied_ ABSL_GUARDED_BY(mu_);  // rank -> keys it holds from us
  std::set<int> configured_ ABSL_GUARDED_BY(mu_);
  v1::ConfigureRequest configure_ ABSL_GUARDED_BY(mu_);
  bool have_configure_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace dtrain::server
