// Whether a pushed gradient holds only finite floats: one NaN or Inf merged into a
// key poisons its weights for every worker, so the server refuses such a push
// (unless --allow-non-finite) instead of applying it.
#pragma once

#include <cstdint>

namespace dtrain::server {

// True when none of x[0..n) is NaN or +-Inf. Runs on every push: one vectorised
// pass, a few percent of a memcpy of the same bytes.
bool AllFinite(const float* x, int64_t n);

// The index of the first NaN or Inf in x[0..n), or -1 (for the error message; slow).
int64_t FirstNonFinite(const float* x, int64_t n);

}  // namespace dtrain::server
