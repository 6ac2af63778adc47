#include "common/kv/finite_check.h"

#include <cmath>

namespace dtrain::kv {
namespace {

// x - x is 0 for every finite x and NaN for NaN and +-Inf, and NaN != 0, so one
// subtraction and one compare per element. ORed into lanes that GCC keeps in a
// vector register (a plain `bad |= ...` over the whole array is a reduction GCC 12's
// -O2 cost model does not vectorise); blocks of 8 floats, tail apart (vector_loop.h).
constexpr int kLanes = 8;

bool BlockAllFinite(const float* __restrict x, int64_t blocks) {
  int bad[kLanes] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const float* p = x + b * kLanes;
    for (int j = 0; j < kLanes; ++j) bad[j] |= (p[j] - p[j]) != 0.0f;
  }
  int any = 0;
  for (int j = 0; j < kLanes; ++j) any |= bad[j];
  return any == 0;
}

}  // namespace

bool AllFinite(const float* x, int64_t n) {
  const int64_t blocks = n / kLanes;
  if (!BlockAllFinite(x, blocks)) return false;
  for (int64_t i = blocks * kLanes; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

int64_t FirstNonFinite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

}  // namespace dtrain::kv
