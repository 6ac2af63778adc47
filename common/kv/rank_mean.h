// The mean of one step's pushes from a set of worker ranks, in the order that makes it
// bit-reproducible: the lowest rank's gradient, plus each next rank's in ascending
// order, divided by the count. With ranks {0 .. n-1} these are exactly the float
// operations of the shard store's MeanGradient(n), so a job that never changes merges
// bit for bit as a non-elastic one (docs/elastic.md).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"

namespace dtrain::kv {

// `ranks`: ascending, not empty; `grad_of(r)`: rank r's numel floats. With one rank
// its gradient is the mean, returned in place (nothing copied); otherwise the mean is
// written to *merged (resized to numel) and a pointer to it returned.
const float* MeanOverRanks(const std::vector<int>& ranks, int64_t numel,
                           absl::FunctionRef<const float*(int rank)> grad_of, std::vector<float>* merged);

}  // namespace dtrain::kv
