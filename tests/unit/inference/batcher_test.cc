// DynamicBatcher with a plain RunBatch: which requests share a forward, how long a lone
// one waits, that each caller gets its own answer, and deadlines.
#include "services/inference/batcher.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dtrain::inference {
namespace {

// A request whose answer is a function of its own input, so a mix-up shows.
struct TestJob final : BatchJob {
  TestJob(int input, int64_t images = 1, const void* model = nullptr) : input(input), images(images), model(model) {}
  const void* group() const override { return model; }
  int64_t rows() const override { return images; }
  int input;
  int64_t images;
  const void* model;
  int answer = -1;
  int batch_jobs = 0;  // how many jobs shared its batch
};

// Records every batch and answers input * 10.
class Recorder {
 public:
  explicit Recorder(absl::Duration forward_time = absl::ZeroDuration()) : forward_time_(forward_time) {}
  DynamicBatcher::RunBatch Run() {
    return [this](const std::vector<BatchJob*>& jobs) {
      absl::SleepFor(forward_time_);
      absl::MutexLock lock(&mu_);
      std::vector<int> inputs;
      for (BatchJob* j : jobs) {
        auto* t = static_cast<TestJob*>(j);
        t->answer = t->input * 10;
        t->batch_jobs = static_cast<int>(jobs.size());
        inputs.push_back(t->input);
      }
      batches_.push_back(inputs);
    };
  }
  std::vector<std::vector<int>> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  const absl::Duration forward_time_;
  absl::Mutex mu_;
  std::vector<std::vector<int>> batches_ ABSL_GUARDED_BY(mu_);
};

// Submits one job per input from its own thread, all at once; returns the jobs.
std::vector<std::unique_ptr<TestJob>> SubmitTogether(DynamicBatcher& batcher, const std::vector<int>& inputs,
                                                     std::vector<absl::Status>* statuses,
                                                     absl::Duration timeout = absl::Seconds(10)) {
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int in : inputs) jobs.push_back(std::make_unique<TestJob>(in));
  statuses->assign(inputs.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] { (*statuses)[i] = batcher.Submit(*jobs[i], absl::Now() + timeout); });
  }
  for (auto& t : threads) t.join();
  return jobs;
}

TEST(DynamicBatcherTest, ConcurrentRequestsFormOneBatchAndEachGetsItsOwnAnswer) {
  Recorder rec;
  // A long delay: the batch runs because it is full, not because the oldest is due.
  DynamicBatcher batcher({.max_batch_size = 8, .max_delay = absl::Seconds(5), .runners = 1}, rec.Run());
  std::vector<absl::Status> statuses;
  const absl::Time start = absl::Now();
  auto jobs = SubmitTogether(batcher, {1, 2, 3, 4, 5, 6, 7, 8}, &statuses);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "a full batch waited for the delay";
  ASSERT_EQ(rec.batches().size(), 1u);
  EXPECT_EQ(rec.batches()[0].size(), 8u);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << statuses[i];
    EXPECT_EQ(jobs[i]->answer, jobs[i]->input * 10);
    EXPECT_EQ(jobs[i]->batch_jobs, 8);
  }
}

TEST(DynamicBatcherTest, ALoneRequestIsAnsweredAfterAtMostTheDelay) {
  Recorder rec;
  constexpr absl::Duration kDelay = absl::Milliseconds(200);
  DynamicBatcher batcher({.max_batch_size = 8, .max_delay = kDelay, .runners = 2}, rec.Run());
  TestJob job(7);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(batcher.Submit(job, absl::Now() + absl::Seconds(10)).ok());
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(job.answer, 70);
  EXPECT_EQ(job.batch_jobs, 1);
  // It waited for company (the delay) but not much longer (slack for a loaded machine).
  EXPECT_GE(waited, kDelay - absl::Milliseconds(5));
  EXPECT_LT(waited, kDelay + absl::Milliseconds(500));
}

TEST(DynamicBatcherTest, ZeroDelayRunsAtOnce) {
  Recorder rec;
  DynamicBatcher batcher({.max_batch_size = 64, .max_delay = absl::ZeroDuration(), .runners = 1}, rec.Run());
  TestJob job(3);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(batcher.Submit(job, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(job.answer, 30);
}

TEST(DynamicBatcherTest, BatchesHoldAtMostMaxImagesAndALargerRequestRunsAlone) {
  Recorder rec;
  DynamicBatcher batcher({.max_batch_size = 4, .max_delay = absl::Milliseconds(100), .runners = 1}, rec.Run());
  std::vector<absl::Status> statuses;
  auto jobs = SubmitTogether(batcher, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, &statuses);
  size_t total = 0;
  for (const auto& b : rec.batches()) {
    EXPECT_LE(b.size(), 4u);
    total += b.size();
  }
  EXPECT_EQ(total, 10u);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(jobs[i]->answer, jobs[i]->input * 10);

  TestJob big(99, /*images=*/10);
  ASSERT_TRUE(batcher.Submit(big, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(big.answer, 990);
  EXPECT_EQ(big.batch_jobs, 1);
}

TEST(DynamicBatcherTest, RequestsOnDifferentModelsNeverShareABatch) {
  Recorder rec;
  DynamicBatcher batcher({.max_batch_size = 8, .max_delay = absl::Milliseconds(100), .runners = 1}, rec.Run());
  int model_a = 0, model_b = 0;
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(std::make_unique<TestJob>(i, 1, i % 2 == 0 ? &model_a : &model_b));
  std::vector<std::thread> threads;
  for (auto& j : jobs) {
    threads.emplace_back([&batcher, job = j.get()] { EXPECT_TRUE(batcher.Submit(*job, absl::Now() + absl::Seconds(10)).ok()); });
  }
  for (auto& t : threads) t.join();
  for (const auto& b : rec.batches()) {
    for (int input : b) EXPECT_EQ(input % 2, b.front() % 2) << "models mixed in one batch";
  }
  for (auto& j : jobs) EXPECT_EQ(j->answer, j->input * 10);
}

TEST(DynamicBatcherTest, AQueuedRequestLeavesAtItsDeadlineAndNeverRuns) {
  Recorder rec(/*forward_time=*/absl::Seconds(2));
  DynamicBatcher batcher({.max_batch_size = 1, .max_delay = absl::ZeroDuration(), .runners = 1}, rec.Run());
  TestJob first(1), second(2);
  std::thread busy([&] { EXPECT_TRUE(batcher.Submit(first, absl::Now() + absl::Seconds(10)).ok()); });
  absl::SleepFor(absl::Milliseconds(100));  // `first` is in the runner's forward now
  const absl::Time start = absl::Now();
  absl::Status s = batcher.Submit(second, absl::Now() + absl::Milliseconds(100));
  const absl::Duration waited = absl::Now() - start;
  busy.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(waited, absl::Milliseconds(95));
  EXPECT_LT(waited, absl::Seconds(1)) << "waited for the forward instead of its deadline";
  EXPECT_EQ(second.answer, -1);
  absl::SleepFor(absl::Milliseconds(100));
  for (const auto& b : rec.batches()) {
    for (int input : b) EXPECT_NE(input, 2) << "a request past its deadline ran";
  }
  EXPECT_EQ(first.answer, 10);
}

TEST(DynamicBatcherTest, StopAnswersQueuedRequestsUnavailable) {
  Recorder rec(/*forward_time=*/absl::Milliseconds(300));
  auto batcher = std::make_unique<DynamicBatcher>(
      BatcherOptions{.max_batch_size = 1, .max_delay = absl::ZeroDuration(), .runners = 1}, rec.Run());
  TestJob first(1), second(2);
  absl::Status first_status, second_status;
  std::thread a([&] { first_status = batcher->Submit(first, absl::Now() + absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  std::thread b([&] { second_status = batcher->Submit(second, absl::Now() + absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  batcher->Stop();
  a.join();
  b.join();
  EXPECT_TRUE(first_status.ok()) << first_status;  // was running: finished
  EXPECT_EQ(first.answer, 10);
  EXPECT_EQ(second_status.code(), absl::StatusCode::kUnavailable) << second_status;
  TestJob late(3);
  EXPECT_EQ(batcher->Submit(late, absl::Now() + absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);
  batcher.reset();  // joins the runners
}

TEST(DynamicBatcherTest, ManyClientsAllGetTheirOwnAnswers) {
  Recorder rec(/*forward_time=*/absl::Microseconds(200));
  DynamicBatcher batcher({.max_batch_size = 8, .max_delay = absl::Microseconds(300), .runners = 2}, rec.Run());
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 50; ++i) {
        TestJob job(c * 1000 + i);
        if (!batcher.Submit(job, absl::Now() + absl::Seconds(10)).ok()) ++failed;
        if (job.answer != job.input * 10) ++wrong;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  size_t jobs = 0, most = 0;
  for (const auto& b : rec.batches()) {
    jobs += b.size();
    most = std::max(most, b.size());
  }
  EXPECT_EQ(jobs, 400u);
  EXPECT_GT(most, 1u) << "8 concurrent clients never shared a forward";
}

}  // namespace
}  // namespace dtrain::inference
