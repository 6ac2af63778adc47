// A loop shape GCC vectorises at -O2.
//
// GCC 12's default -O2 cost model ("very cheap") vectorises a loop only when no scalar
// epilogue is needed, i.e. when the trip count is known to be a multiple of the vector
// width. Running the body over n & ~7 elements, then over the tail, gives it that.
// It is fragile: with two such loops in one function GCC vectorised neither, so each
// kernel gets its own ABSL_ATTRIBUTE_NOINLINE function. Check with -fopt-info-vec.
#pragma once

#include <cstdint>

#include "absl/base/attributes.h"

namespace dtrain::kv {

// Calls body(i) for i in [0, n). `body` should be a simple element-wise lambda over
// __restrict pointers captured by value. Always inlined, so the loop is the kernel's.
template <typename Body>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void ForEachElement(int64_t n, Body body) {
  const int64_t head = n & ~int64_t{7};
  for (int64_t i = 0; i < head; ++i) body(i);
  for (int64_t i = head; i < n; ++i) body(i);
}

}  // namespace dtrain::kv
