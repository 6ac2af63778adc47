// One flat tensor for all of a model's parameters, and one for their gradients: each
// parameter (and its `.grad()`) becomes a view into them. A step then moves every gradient
// to the host, every weight back, and zeroes every gradient with one operation each,
// instead of one per parameter (ResNet-20 has 65 parameters; on a GPU each copy or kernel
// costs its launch, which at this size is most of its time).
//
// Autograd accumulates into a defined `.grad()` in place, so backward keeps writing into
// the views; nothing may reset them (zero_grad(set_to_none), or assigning a new `.grad()`)
// or move the parameters (Module::to) afterwards.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"

namespace dtrain::worker {

struct FlatParameters {
  torch::Tensor values;  // 1-D, every parameter's values at its offset
  torch::Tensor grads;   // 1-D, the same layout, zero at first
};

// Each parameter starts at a multiple of this many elements (256 bytes of float), so the
// views are as aligned as separately allocated tensors are for the kernels that read them.
inline constexpr int64_t kFlatAlignment = 64;

// Rebinds `params` (float32, on one device) to views of two new flat tensors made with
// `options` (its device, and e.g. pinned memory), keeping their values; every gradient
// starts at zero. The parameters' storage changes: call it before anything keeps pointers
// to them. INVALID_ARGUMENT for another dtype, or parameters on different devices.
absl::StatusOr<FlatParameters> Flatten(const std::vector<torch::Tensor>& params, const torch::TensorOptions& options);

}  // namespace dtrain::worker
