#include "services/server/snapshot_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/kv/shard_snapshot.h"
#include "common/log.h"

namespace dtrain::server {

SnapshotWriter::SnapshotWriter(SnapshotOptions options, kv::ShardStore* store, SnapshotMetrics* metrics)
    : options_(std::move(options)), store_(store), metrics_(metrics) {
  store_->SetSnapshotHook(options_.every, [this](kv::KeyState k) { Add(std::move(k)); });
  thread_ = std::thread([this] { Run(); });
}

SnapshotWriter::~SnapshotWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void SnapshotWriter::SetRank(int rank) {
  std::vector<int64_t> found = kv::CompleteShardSnapshotSteps(options_.dir, rank, store_->job_id());
  absl::MutexLock lock(&mu_);
  rank_ = rank;
  for (int64_t s : found) {
    if (std::find(kept_.begin(), kept_.end(), s) == kept_.end()) kept_.push_back(s);
  }
  std::sort(kept_.begin(), kept_.end());
  if (!found.empty()) {
    DTRAIN_LOG(INFO) << "found " << found.size() << " complete snapshots of server " << rank << " in " << options_.dir
                     << ", newest of step " << found.front();
  }
}

std::vector<int64_t> SnapshotWriter::complete_steps() const {
  absl::MutexLock lock(&mu_);
  return std::vector<int64_t>(kept_.rbegin(), kept_.rend());
}

void SnapshotWriter::ForgetAfter(int64_t step) {
  std::vector<int64_t> drop;
  int rank;
  {
    absl::MutexLock lock(&mu_);
    pending_.erase(pending_.upper_bound(step), pending_.end());
    auto later = std::upper_bound(kept_.begin(), kept_.end(), step);
    drop.assign(later, kept_.end());
    kept_.erase(later, kept_.end());
    rank = rank_;
  }
  for (int64_t s : drop) {
    if (absl::Status rs = kv::RemoveShardSnapshot(options_.dir, rank, s); !rs.ok()) DTRAIN_LOG(WARNING) << rs.message();
  }
}

void SnapshotWriter::SetOnWritten(std::function<void()> on_written) {
  absl::MutexLock lock(&mu_);
  on_written_ = std::move(on_written);
}

bool SnapshotWriter::WaitIdle(absl::Time deadline) {
  for (;;) {
    const int64_t keys = store_->num_keys();
    {
      absl::MutexLock lock(&mu_);
      bool idle = !writing_ && checked_ == added_;
      for (const auto& [step, k] : pending_) idle = idle && static_cast<int64_t>(k.size()) < keys;
      if (idle) return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

bool SnapshotWriter::ShouldLook() const { return stop_ || added_ != checked_; }

// Under the key's lock (ShardStore's hook): a move into the map, nothing more.
void SnapshotWriter::Add(kv::KeyState k) {
  absl::MutexLock lock(&mu_);
  const int64_t step = k.version;
  pending_[step].push_back(std::move(k));
  ++added_;
}

void SnapshotWriter::Run() {
  for (;;) {
    int rank = -1;
    int64_t step = -1;
    std::vector<kv::KeyState> keys;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SnapshotWriter::ShouldLook));
      if (stop_) return;
      checked_ = added_;
      // Asked outside the store's key locks (this thread holds none), so no cycle.
      const int64_t held = store_->num_keys();
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (static_cast<int64_t>(it->second.size()) < held) continue;
        step = it->first;
        keys = std::move(it->second);
        pending_.erase(it);
        break;
      }
      if (step < 0) continue;
      rank = rank_;
      writing_ = true;
      // More keys may be complete: look again after this one.
      --checked_;
    }
    Write(rank, step, std::move(keys));
    absl::MutexLock lock(&mu_);
    writing_ = false;
  }
}

void SnapshotWriter::Write(int rank, int64_t step, std::vector<kv::KeyState> keys) {
  const absl::Time start = absl::Now();
  kv::ShardSnapshot snap;
  snap.server_rank = rank;
  snap.step = step;
  snap.job_id = store_->job_id();
  absl::Status s;
  if (rank < 0) s = absl::FailedPreconditionError("the server has no rank yet");
  if (s.ok() && !store_->GetConfig(&snap.config)) s = absl::FailedPreconditionError("the store is not configured");
  int64_t bytes = 0;
  if (s.ok()) {
    std::sort(keys.begin(), keys.end(), [](const kv::KeyState& a, const kv::KeyState& b) { return a.key < b.key; });
    for (const kv::KeyState& k : keys) {
      bytes += static_cast<int64_t>((k.values.size() + k.optimizer_state.size()) * sizeof(float));
    }
    snap.keys = std::move(keys);
    s = kv::WriteShardSnapshot(options_.dir, snap);
  }
  if (!s.ok()) {
    // The job goes on: a missing snapshot only moves the rollback point back.
    DTRAIN_LOG(ERROR) << "snapshot of step " << step << " not written: " << s.message();
    if (metrics_ != nullptr) metrics_->Failed();
    return;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (metrics_ != nullptr) metrics_->Written(seconds, bytes);
  std::vector<int64_t> drop;
  std::function<void()> on_written;
  {
    absl::MutexLock lock(&mu_);
    on_written = on_written_;
    kept_.push_back(step);
    std::sort(kept_.begin(), kept_.end());
    kept_.erase(std::unique(kept_.begin(), kept_.end()), kept_.end());
    while (static_cast<int>(kept_.size()) > options_.keep) {
      drop.push_back(kept_.front());
      kept_.erase(kept_.begin());
    }
  }
  for (int64_t old : drop) {
    if (absl::Status rs = kv::RemoveShardSnapshot(options_.dir, rank, old); !rs.ok()) {
      DTRAIN_LOG(WARNING) << rs.message();
    }
  }
  DTRAIN_LOG(INFO) << "snapshot of step " << step << ": " << snap.keys.size() << " keys, " << bytes << " bytes in "
                   << absl::StrFormat("%.1f", seconds * 1000) << " ms -> "
                   << kv::ShardSnapshotPath(options_.dir, rank, step);
  if (on_written) on_written();
}

}  // namespace dtrain::server
