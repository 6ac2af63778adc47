// The element-wise kernels the shard store merges and packs with. Each is its own
// out-of-line function with one loop (vector_loop.h: GCC 12 at -O2 vectorises neither
// of two such loops sharing one function). Element-wise IEEE adds, subtracts and
// divides: vectorised or not, the results are the same bits.
#pragma once

#include <cstdint>

namespace dtrain::kv {

// acc[i] += g[i]
void AddInto(float* __restrict acc, const float* __restrict g, int64_t n);
// acc[i] -= g[i]
void SubtractFrom(float* __restrict acc, const float* __restrict g, int64_t n);
// acc[i] /= d
void DivideBy(float* __restrict acc, int64_t n, float d);

}  // namespace dtrain::kv
