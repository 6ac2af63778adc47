#include "services/worker/kv/local_aggregator_factory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if DTRAIN_WITH_NCCL
#include "services/worker/kv/nccl_aggregator.h"
#endif

namespace dtrain::worker {

bool BuiltWithNccl() { return DTRAIN_WITH_NCCL != 0; }

absl::StatusOr<std::unique_ptr<LocalAggregator>> MakeLocalAggregator(const std::vector<int>& gpus) {
  if (gpus.empty()) return std::make_unique<CpuAggregator>(1);
#if DTRAIN_WITH_NCCL
  absl::StatusOr<std::unique_ptr<NcclAggregator>> nccl = NcclAggregator::Create(gpus);
  if (!nccl.ok()) return nccl.status();
  return std::unique_ptr<LocalAggregator>(*std::move(nccl));
#else
  return absl::FailedPreconditionError(
      absl::StrCat("GPUs ", absl::StrJoin(gpus, ","),
                   ": this dtrain was built without CUDA (-DDTRAIN_CUDA=OFF or no CUDA toolkit found)"));
#endif
}

}  // namespace dtrain::worker
