#include "services/inference/batcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dtrain::inference {
namespace {
// How long a peak of rows in flight counts for the target: one to two of these. Long
// enough to span the gaps of closed-loop clients (answer, think, ask again), short
// enough that a client mix that shrank stops being waited for within seconds.
constexpr absl::Duration kPeakWindow = absl::Seconds(1);
}  // namespace

DynamicBatcher::DynamicBatcher(BatcherOptions options, RunBatch run, BatchObserver observer)
    : options_([&] {
        options.max_batch_size = std::max<int64_t>(1, options.max_batch_size);
        options.max_delay = std::max(absl::ZeroDuration(), options.max_delay);
        options.runners = std::max(1, options.runners);
        return options;
      }()),
      run_(std::move(run)),
      observer_(std::move(observer)) {
  runners_.reserve(static_cast<size_t>(options_.runners));
  for (int i = 0; i < options_.runners; ++i) runners_.emplace_back([this] { RunnerLoop(); });
}

DynamicBatcher::~DynamicBatcher() {
  Stop();
  for (std::thread& t : runners_) t.join();
}

void DynamicBatcher::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (Entry* e : queue_) {
    e->status = absl::UnavailableError("the server is stopping; the request was not run");
    e->state = State::kDone;
  }
  queue_.clear();
  rows_queued_ = 0;
}

absl::Status DynamicBatcher::Submit(BatchJob& job, absl::Time deadline) {
  Entry entry{&job, std::max<int64_t>(1, job.rows()), absl::Now()};
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the server is stopping; the request was not run");
  queue_.push_back(&entry);
  rows_queued_ += entry.rows;
  NoteInFlight(entry.enqueued);
  auto taken = [&entry] { return entry.state != State::kQueued; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&taken), deadline)) {
    // Still queued (taking is done under mu_): leave, so no batch ever sees it.
    const size_t ahead = static_cast<size_t>(std::find(queue_.begin(), queue_.end(), &entry) - queue_.begin());
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(ahead));
    rows_queued_ -= entry.rows;
    return absl::DeadlineExceededError(absl::StrCat("deadline passed after ",
                                                    absl::FormatDuration(absl::Now() - entry.enqueued),
                                                    " in the batching queue (", ahead, " request(s) ahead)"));
  }
  // In a running batch: RunBatch reads this caller's memory, so stay until it is done.
  // The wait is bounded by the one forward pass.
  auto done = [&entry] { return entry.state == State::kDone; };
  mu_.Await(absl::Condition(&done));
  return entry.status;
}

int64_t DynamicBatcher::RowsQueuedFor(const void* group) const {
  int64_t rows = 0;
  for (const Entry* e : queue_) {
    if (e->job->group() == group) rows += e->rows;
  }
  return rows;
}

void DynamicBatcher::NoteInFlight(absl::Time now) {
  if (now - window_start_ >= kPeakWindow) {
    // A window with no arrival at all leaves nothing to remember.
    peak_before_ = now - window_start_ >= 2 * kPeakWindow ? 0 : peak_now_;
    peak_now_ = 0;
    window_start_ = now;
  }
  peak_now_ = std::max(peak_now_, rows_queued_ + rows_running_);
}

int64_t DynamicBatcher::TargetRows(absl::Time now) {
  NoteInFlight(now);
  const int64_t peak = std::max(peak_now_, peak_before_);
  const int64_t share = (peak + options_.runners - 1) / options_.runners;
  // Rows in running batches cannot join this one: with one runner, a burst of 8 whose
  // first runs alone leaves 7 to wait for, not 8 (which would wait out max_delay).
  return std::clamp<int64_t>(std::min(share, peak - rows_running_), 1, options_.max_batch_size);
}

std::vector<DynamicBatcher::Entry*> DynamicBatcher::FormBatch() {
  for (;;) {
    if (stopping_ || queue_.empty()) return {};
    const Entry* oldest = queue_.front();
    const absl::Time due = oldest->enqueued + options_.max_delay;
    const absl::Time now = absl::Now();
    const int64_t target = TargetRows(now);
    if (RowsQueuedFor(oldest->job->group()) >= target || now >= due) break;
    // Wake when the batch is full, the oldest left (at its deadline: the front and its
    // due time change) or the oldest is due; not at every arrival that leaves the batch
    // short (a context switch per request for nothing). Woken, the loop looks at the
    // target anew (arrivals may have raised it).
    const void* group = oldest->job->group();
    auto act = [this, oldest, group, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || queue_.empty() || queue_.front() != oldest || RowsQueuedFor(group) >= target;
    };
    mu_.AwaitWithDeadline(absl::Condition(&act), due);
  }
  // Oldest first, the oldest's group only, stopping at the first job that would not
  // fit: later jobs never overtake an earlier one of the same model.
  const void* group = queue_.front()->job->group();
  std::vector<Entry*> batch;
  int64_t rows = 0;
  for (auto it = queue_.begin(); it != queue_.end() && rows < options_.max_batch_size;) {
    Entry* e = *it;
    if (e->job->group() != group) {
      ++it;
      continue;
    }
    if (!batch.empty() && rows + e->rows > options_.max_batch_size) break;
    rows += e->rows;
    e->state = State::kRunning;
    batch.push_back(e);
    it = queue_.erase(it);
  }
  rows_queued_ -= rows;
  rows_running_ += rows;
  return batch;
}

void DynamicBatcher::RunnerLoop() {
  for (;;) {
    std::vector<Entry*> batch;
    {
      absl::MutexLock lock(&mu_);
      // An idle runner waits for work with no deadline: Stop() is what ends it.
      auto can_form = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || (!forming_ && !queue_.empty()); };
      mu_.Await(absl::Condition(&can_form));
      if (stopping_) return;
      forming_ = true;
      batch = FormBatch();
      forming_ = false;
    }
    if (batch.empty()) continue;
    std::vector<BatchJob*> jobs;
    int64_t rows = 0;
    jobs.reserve(batch.size());
    for (const Entry* e : batch) {
      jobs.push_back(e->job);
      rows += e->rows;
    }
    if (observer_) observer_(static_cast<int>(jobs.size()), rows);
    run_(jobs);
    absl::MutexLock lock(&mu_);
    for (Entry* e : batch) e->state = State::kDone;
    rows_running_ -= rows;
  }
}

}  // namespace dtrain::inference
