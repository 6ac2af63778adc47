#include "common/kv/vector_ops.h"

#include "absl/base/attributes.h"
#include "common/kv/vector_loop.h"

namespace dtrain::kv {

ABSL_ATTRIBUTE_NOINLINE void AddInto(float* __restrict acc, const float* __restrict g, int64_t n) {
  ForEachElement(n, [=](int64_t i) { acc[i] += g[i]; });
}

ABSL_ATTRIBUTE_NOINLINE void SubtractFrom(float* __restrict acc, const float* __restrict g, int64_t n) {
  ForEachElement(n, [=](int64_t i) { acc[i] -= g[i]; });
}

ABSL_ATTRIBUTE_NOINLINE void DivideBy(float* __restrict acc, int64_t n, float d) {
  ForEachElement(n, [=](int64_t i) { acc[i] /= d; });
}

}  // namespace dtrain::kv
