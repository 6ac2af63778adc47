// Writes a server's shard snapshots (docs/recovery.md "Servers: snapshots
// and rollback"). The shard store hands each key's state out under the key's lock the
// moment the key reaches a multiple of --snapshot-every (ShardStore::SetSnapshotHook);
// this class gathers them per step and, once every key of the shard is in, a
// background thread writes DIR/server-<rank>-step-<S>.snapshot (common/kv/
// shard_snapshot.h: atomic, CRC) and removes all but the newest `keep` of those this
// job has. The training step never waits for the disk: it pays one copy of each key
// every N steps.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/kv/shard_store.h"
#include "services/server/snapshot_metrics.h"

namespace dtrain::server {

struct SnapshotOptions {
  std::string dir;
  int64_t every = 0;  // steps; > 0
  int keep = 2;       // newest complete snapshots kept on disk
};

class SnapshotWriter {
 public:
  // Installs the store's hook, so construct it before the store is configured.
  // `store` and `metrics` (null: none) must outlive the writer.
  SnapshotWriter(SnapshotOptions options, kv::ShardStore* store, SnapshotMetrics* metrics);
  // Stops the thread; a snapshot being written is finished, pending ones are dropped.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // The rank that names the files; set once registered, before the first snapshot is
  // due (no worker trains before every server registered). Also takes this rank's
  // complete snapshots of the store's job already in the directory (a restarted
  // server's) into the kept set; corrupt ones are named in the log and ignored.
  void SetRank(int rank);

  // The steps of the complete snapshots kept, newest first: what the scheduler may
  // roll back to.
  std::vector<int64_t> complete_steps() const;

  // A rollback to `step` abandons the later steps: forgets snapshots in progress after
  // it and removes kept ones after it (they belong to the abandoned timeline).
  void ForgetAfter(int64_t step);
  // Called (from the writer's thread) after each snapshot written.
  void SetOnWritten(std::function<void()> on_written);

  // Blocks until no complete step waits to be written, or `deadline` (tests).
  bool WaitIdle(absl::Time deadline);

 private:
  void Add(kv::KeyState k);
  bool ShouldLook() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run();
  void Write(int rank, int64_t step, std::vector<kv::KeyState> keys);

  const SnapshotOptions options_;
  kv::ShardStore* const store_;
  SnapshotMetrics* const metrics_;
  mutable absl::Mutex mu_;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t added_ ABSL_GUARDED_BY(mu_) = 0;    // keys handed in, ever
  uint64_t checked_ ABSL_GUARDED_BY(mu_) = 0;  // `added_` when the thread last looked
  std::map<int64_t, std::vector<kv::KeyState>> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> kept_ ABSL_GUARDED_BY(mu_);  // ascending
  std::function<void()> on_written_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace dtrain::server
