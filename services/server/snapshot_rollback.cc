#include "services/server/snapshot_rollback.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kv/shard_snapshot.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::server {

SnapshotRollback::SnapshotRollback(std::string dir, kv::ShardStore* store, SnapshotWriter* writer, Reporter reporter)
    : dir_(std::move(dir)), store_(store), writer_(writer), reporter_(std::move(reporter)) {}

void SnapshotRollback::Start(int rank, bool replaced) {
  {
    absl::MutexLock lock(&mu_);
    rank_ = rank;
    shard_lost_ = replaced && !store_->configured();
  }
  Report();
}

void SnapshotRollback::Report() {
  v1::SnapshotReport report;
  {
    absl::MutexLock lock(&mu_);
    if (rank_ < 0) return;  // not listed yet: the scheduler must not take "none" for our answer
    report.set_listed(true);
    report.set_rollback_done(done_);
    report.set_rollback_step(done_step_);
    report.set_rollback_reason(done_reason_);
    report.set_shard_lost(shard_lost_);
  }
  for (int64_t step : writer_->complete_steps()) report.add_complete_steps(step);
  reporter_(report);
}

absl::Status SnapshotRollback::Load(int64_t step) {
  int rank;
  {
    absl::MutexLock lock(&mu_);
    rank = rank_;
  }
  const std::string path = kv::ShardSnapshotPath(dir_, rank, step);
  DTRAIN_ASSIGN_OR_RETURN(kv::ShardSnapshot snap, kv::ReadShardSnapshot(path));
  const std::string job = store_->job_id();
  if (!job.empty() && snap.job_id != job) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is of job '", snap.job_id, "', this server runs job '", job, "'"));
  }
  // The writer must not finish snapshots of the abandoned steps after this.
  writer_->ForgetAfter(step);
  if (store_->configured()) return store_->Restore(snap.keys, step);
  // A restarted server: nothing came from the workers (they configured our
  // predecessor), so the snapshot brings the configuration too.
  DTRAIN_RETURN_IF_ERROR(store_->Configure(snap.config));
  for (const kv::KeyState& k : snap.keys) {
    DTRAIN_RETURN_IF_ERROR(store_->InitKey(k.key, k.shape, k.values.data(), static_cast<int64_t>(k.values.size()), step,
                                           k.optimizer_state));
  }
  return absl::OkStatus();
}

void SnapshotRollback::OnOrder(const v1::RollbackOrder& order) {
  {
    absl::MutexLock lock(&mu_);
    if (order.generation() <= done_ || rank_ < 0) return;
  }
  const absl::Time start = absl::Now();
  if (absl::Status s = Load(order.step()); !s.ok()) {
    DTRAIN_LOG(ERROR) << "cannot roll back to step " << order.step() << ": " << s.message();
    return;
  }
  DTRAIN_LOG(WARNING) << order.reason() << ": reloaded this server's snapshot of step " << order.step() << " in "
                      << absl::FormatDuration(absl::Now() - start);
  if (on_loaded_) on_loaded_(order.step());
  {
    absl::MutexLock lock(&mu_);
    done_ = order.generation();
    done_step_ = order.step();
    done_reason_ = order.reason();
    shard_lost_ = false;
  }
  Report();
}

}  // namespace dtrain::server
