#include "common/kv/worker_fence.h"

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

WorkerFence::WorkerFence(int num_workers)
    : num_workers_(num_workers), highest_(std::make_unique<std::atomic<uint64_t>[]>(num_workers)) {
  for (int w = 0; w < num_workers; ++w) highest_[w].store(0);
}

absl::Status WorkerFence::SetJobId(absl::string_view job_id) {
  if (job_id.size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id has ", job_id.size(), " bytes, over the cap of ", kMaxJobIdBytes));
  }
  if (job_id.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (job_id_.empty()) {
    job_id_ = std::string(job_id);
    has_job_id_.store(true, std::memory_order_release);
    return absl::OkStatus();
  }
  if (job_id_ == job_id) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("this server runs job '", job_id_, "', not '", job_id, "'"));
}

absl::Status WorkerFence::CheckJob(int worker_rank, absl::string_view job_id) {
  if (job_id.empty()) return absl::OkStatus();
  if (job_id.size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker_rank, ": job id has ", job_id.size(),
                                                   " bytes, over the cap of ", kMaxJobIdBytes));
  }
  if (!has_job_id_.load(std::memory_order_acquire)) {
    absl::MutexLock lock(&mu_);
    if (job_id_.empty()) {  // the first worker to say adopts it for the server
      job_id_ = std::string(job_id);
      has_job_id_.store(true, std::memory_order_release);
      return absl::OkStatus();
    }
  }
  absl::ReaderMutexLock lock(&mu_);
  if (job_id_ == job_id) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("worker ", worker_rank, " belongs to job '", job_id, "', but this server runs job '", job_id_, "'"));
}

absl::StatusOr<WorkerFence::Admission> WorkerFence::Admit(int worker_rank, absl::string_view job_id,
                                                          uint64_t incarnation) {
  if (worker_rank < 0 || worker_rank >= num_workers_) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_rank ", worker_rank, " out of range [0, ", num_workers_, ")"));
  }
  if (absl::Status s = CheckJob(worker_rank, job_id); !s.ok()) return s;
  Admission a;
  if (incarnation == 0) return a;  // not said: an older client
  std::atomic<uint64_t>& highest = highest_[worker_rank];
  uint64_t seen = highest.load(std::memory_order_acquire);
  while (true) {
    if (incarnation == seen) return a;
    if (incarnation < seen) {
      return absl::FailedPreconditionError(
          absl::StrCat("fenced: worker ", worker_rank, " incarnation ", incarnation, " replaced by ", seen));
    }
    if (highest.compare_exchange_weak(seen, incarnation, std::memory_order_acq_rel)) break;
  }
  a.raised = true;
  a.replaced = seen;
  return a;
}

std::string WorkerFence::job_id() const {
  absl::ReaderMutexLock lock(&mu_);
  return job_id_;
}

uint64_t WorkerFence::incarnation(int worker_rank) const {
  if (worker_rank < 0 || worker_rank >= num_workers_) return 0;
  return highest_[worker_rank].load(std::memory_order_acquire);
}

}  // namespace dtrain::kv
