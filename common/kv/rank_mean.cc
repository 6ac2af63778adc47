#include "common/kv/rank_mean.h"

#include "common/kv/vector_ops.h"

namespace dtrain::kv {

const float* MeanOverRanks(const std::vector<int>& ranks, int64_t numel,
                           absl::FunctionRef<const float*(int rank)> grad_of, std::vector<float>* merged) {
  if (ranks.size() == 1) return grad_of(ranks[0]);
  const float* first = grad_of(ranks[0]);
  merged->assign(first, first + numel);
  float* acc = merged->data();
  for (size_t i = 1; i < ranks.size(); ++i) AddInto(acc, grad_of(ranks[i]), numel);
  DivideBy(acc, numel, static_cast<float>(ranks.size()));
  return acc;
}

}  // namespace dtrain::kv
