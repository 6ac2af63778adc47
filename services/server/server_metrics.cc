#include "services/server/server_metrics.h"

#include "common/metrics/families.h"

namespace dtrain::server {

using metrics::internal::AddCounter;
using metrics::internal::AddGauge;
using metrics::internal::AddHistogram;

ServerMetrics::ServerMetrics(metrics::MetricsRegistry& registry) {
  prometheus::Registry& r = registry.families();
  push_requests_ = &AddCounter(r, "dtrain_server_push_requests_total",
                               "Push requests received (a push-pull counts as one push and one pull).");
  pull_requests_ = &AddCounter(r, "dtrain_server_pull_requests_total", "Pull requests received.");
  push_bytes_ = &AddCounter(r, "dtrain_server_push_bytes_total",
                            "Gradient bytes received in pushes, as sent (compressed with --gc-type).");
  push_unpacked_bytes_ = &AddCounter(r, "dtrain_server_push_uncompressed_bytes_total",
                                     "Bytes of the float32 gradients the accepted pushes unpacked to (equal to "
                                     "push_bytes without gradient compression).");
  pull_bytes_ = &AddCounter(r, "dtrain_server_pull_bytes_total",
                            "Bytes sent in answers to pulls (weights, or their packed change with --pull-gc-type).");
  pull_weight_bytes_ = &AddCounter(r, "dtrain_server_pull_uncompressed_bytes_total",
                                   "What the answers to pulls are as float32 weights: over "
                                   "dtrain_server_pull_bytes_total, the pull compression ratio.");
  request_errors_ = &AddCounter(r, "dtrain_server_request_errors_total",
                                "Requests answered with an error (bad key or size, timeout, ...).");
  updates_ = &AddCounter(r, "dtrain_server_updates_applied_total",
                         "Optimizer updates applied, summed over this server's keys.");
  update_seconds_ = &AddCounter(r, "dtrain_server_update_seconds_total",
                                "Seconds spent merging sync steps' pushes and applying the optimizer, summed over "
                                "keys (not the waits for pushes): the server's own compute per step.");
  workers_seen_ = &AddGauge(r, "dtrain_server_workers_seen", "Distinct workers this server has heard from.");
  parked_pulls_ = &AddGauge(r, "dtrain_server_parked_pulls",
                            "Sync pulls waiting for their step's last push (dropped with their stream).");
  sync_wait_ = &AddHistogram(r, "dtrain_server_sync_wait_seconds",
                             "Sync mode, per key and step: seconds from the first worker's push to the last "
                             "one's, i.e. how long the step waited for its slowest worker.",
                             metrics::internal::SecondsBuckets());
  staleness_ = &AddHistogram(r, "dtrain_server_push_staleness_updates",
                             "Async mode: updates applied to a key between a worker's pull and its next push "
                             "(0: the gradient was computed on the current weights). dist_ssp: how many versions "
                             "behind its step the weights a push was computed on were (it counts 1/(1+lag) in "
                             "the step's mean).",
                             {0, 1, 2, 4, 8, 16, 32, 64, 128});
  catch_up_hold_ = &AddHistogram(r, "dtrain_server_catch_up_hold_seconds",
                                 "Replication: seconds a key's answers were held while its state was copied to a "
                                 "restarted chain member (the copy's round trip).",
                                 metrics::internal::SecondsBuckets());
  catch_up_ok_ =
      &AddCounter(r, "dtrain_server_catch_up_copies_total", "Replication: keys copied to a restarted chain member.");
  catch_up_failed_ = &AddCounter(r, "dtrain_server_catch_up_failures_total",
                                 "Replication: copies to a restarted chain member that failed (retried at the "
                                 "key's next version).");
}

void ServerMetrics::CatchUpCopy(double held_seconds, bool ok) {
  catch_up_hold_->Observe(held_seconds);
  (ok ? catch_up_ok_ : catch_up_failed_)->Increment();
}

void ServerMetrics::PushUnpacked(int64_t bytes) {
  if (bytes > 0) push_unpacked_bytes_->Increment(static_cast<double>(bytes));
}

void ServerMetrics::PushReceived(int64_t bytes) {
  push_requests_->Increment();
  push_bytes_->Increment(static_cast<double>(bytes));
}

void ServerMetrics::PullRequested() { pull_requests_->Increment(); }

void ServerMetrics::PullAnswered(int64_t bytes, int64_t weight_bytes) {
  pull_bytes_->Increment(static_cast<double>(bytes));
  pull_weight_bytes_->Increment(static_cast<double>(weight_bytes));
}

void ServerMetrics::RequestFailed() { request_errors_->Increment(); }

void ServerMetrics::SyncStepMerged(double seconds) { sync_wait_->Observe(seconds); }

void ServerMetrics::PushStaleness(int64_t staleness) { staleness_->Observe(static_cast<double>(staleness)); }

void ServerMetrics::UpdateApplied(double seconds) {
  updates_->Increment();
  update_seconds_->Increment(seconds);
}

void ServerMetrics::WorkerSeen() { workers_seen_->Increment(); }

void ServerMetrics::ParkedPulls(int64_t delta) {
  if (delta >= 0) {
    parked_pulls_->Increment(static_cast<double>(delta));
  } else {
    parked_pulls_->Decrement(static_cast<double>(-delta));
  }
}

}  // namespace dtrain::server
