#include "services/inference/class_outputs.h"

#include <algorithm>
#include <numeric>

namespace dtrain::inference {

ClassOutputs ClassOutputs::Rows(int64_t first, int64_t count) const {
  ClassOutputs out;
  out.images = count;
  out.num_classes = num_classes;
  const auto begin = static_cast<std::ptrdiff_t>(first * num_classes);
  const auto end = static_cast<std::ptrdiff_t>((first + count) * num_classes);
  out.logits.assign(logits.begin() + begin, logits.begin() + end);
  out.probabilities.assign(probabilities.begin() + begin, probabilities.begin() + end);
  return out;
}

Predictions TopClasses(const ClassOutputs& outputs, int top_k) {
  const int classes = outputs.num_classes;
  const int k = std::max(1, std::min(top_k, classes));
  Predictions out(static_cast<size_t>(outputs.images));
  std::vector<int> order(static_cast<size_t>(classes));
  for (int64_t i = 0; i < outputs.images; ++i) {
    const float* p = outputs.probabilities.data() + i * classes;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [p](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    auto& top = out[static_cast<size_t>(i)];
    top.reserve(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) top.push_back({order[static_cast<size_t>(j)], p[order[static_cast<size_t>(j)]]});
  }
  return out;
}

}  // namespace dtrain::inference
