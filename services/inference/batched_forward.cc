#include "services/inference/batched_forward.h"

#include <utility>
#include <vector>

namespace dtrain::inference {
namespace {

// One request in the batcher's queue: the model it was validated against (its group)
// and its images; the batch writes `result`.
class ModelJob final : public BatchJob {
 public:
  ModelJob(std::shared_ptr<const LoadedModel> model, const ImageBatchView& images)
      : model_(std::move(model)), images_(images) {}

  const void* group() const override { return model_.get(); }
  int64_t rows() const override { return images_.count; }

  const LoadedModel& model() const { return *model_; }
  const ImageBatchView& images() const { return images_; }
  absl::StatusOr<ClassOutputs> result = absl::InternalError("the batch did not answer this request");

 private:
  const std::shared_ptr<const LoadedModel> model_;
  const ImageBatchView& images_;
};

// Every job of a batch shares one model (the batcher groups by it) and is a ModelJob
// (Run submits nothing else).
void RunModelBatch(const std::vector<BatchJob*>& jobs) {
  std::vector<const ImageBatchView*> parts;
  parts.reserve(jobs.size());
  for (BatchJob* j : jobs) parts.push_back(&static_cast<ModelJob*>(j)->images());
  absl::StatusOr<std::vector<ClassOutputs>> outputs = static_cast<ModelJob*>(jobs.front())->model().Forward(parts);
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto* job = static_cast<ModelJob*>(jobs[i]);
    if (outputs.ok()) {
      job->result = std::move((*outputs)[i]);
    } else {
      job->result = outputs.status();
    }
  }
}

}  // namespace

BatchedForward::BatchedForward(BatcherOptions options, DynamicBatcher::BatchObserver observer)
    : batcher_(options, RunModelBatch, std::move(observer)) {}

absl::StatusOr<ClassOutputs> BatchedForward::Run(std::shared_ptr<const LoadedModel> model, const ImageBatchView& images,
                                                 absl::Time deadline) {
  ModelJob job(std::move(model), images);
  if (absl::Status s = batcher_.Submit(job, deadline); !s.ok()) return s;
  return std::move(job.result);
}

}  // namespace dtrain::inference
