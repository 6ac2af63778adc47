#include "services/worker/epoch_reports.h"

#include <algorithm>

namespace dtrain::worker {

v1::EpochReport ToReport(const EpochFigures& f) {
  v1::EpochReport r;
  r.set_epoch(f.epoch);
  r.set_samples(f.samples);
  r.set_train_seconds(f.train_seconds);
  r.set_eval_correct(f.eval_correct);
  r.set_eval_count(f.eval_count);
  r.set_eval_loss_sum(f.eval_loss_sum);
  return r;
}

bool EpochReportsOf(const v1::GetStatusResponse& status, int num_workers, int64_t epoch, std::vector<EpochFigures>* out,
                    std::vector<int>* missing) {
  out->assign(num_workers, EpochFigures());
  std::vector<bool> found(num_workers, false);
  for (const v1::NodeInfo& n : status.nodes()) {
    if (n.role() != v1::ROLE_WORKER || n.rank() < 0 || n.rank() >= num_workers) continue;
    for (const v1::EpochReport& r : n.recent_epochs()) {
      if (r.epoch() != epoch) continue;
      EpochFigures& f = (*out)[n.rank()];
      f.epoch = r.epoch();
      f.samples = r.samples();
      f.train_seconds = r.train_seconds();
      f.eval_correct = r.eval_correct();
      f.eval_count = r.eval_count();
      f.eval_loss_sum = r.eval_loss_sum();
      found[n.rank()] = true;
    }
  }
  missing->clear();
  for (int r = 0; r < num_workers; ++r) {
    if (!found[r]) missing->push_back(r);
  }
  return missing->empty();
}

CombinedEpoch Combine(const std::vector<EpochFigures>& all) {
  CombinedEpoch c;
  int64_t correct = 0;
  double loss = 0;
  for (const EpochFigures& f : all) {
    ++c.workers;
    c.samples += f.samples;
    c.samples_per_sec += static_cast<double>(f.samples) / std::max(1e-9, f.train_seconds);
    c.eval_count += f.eval_count;
    correct += f.eval_correct;
    loss += f.eval_loss_sum;
  }
  if (c.eval_count > 0) {
    c.validation_accuracy = static_cast<double>(correct) / static_cast<double>(c.eval_count);
    c.validation_cross_entropy = loss / static_cast<double>(c.eval_count);
  }
  return c;
}

}  // namespace dtrain::worker
