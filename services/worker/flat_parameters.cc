#include "services/worker/flat_parameters.h"

#include "absl/strings/str_cat.h"

namespace dtrain::worker {

absl::StatusOr<FlatParameters> Flatten(const std::vector<torch::Tensor>& params, const torch::TensorOptions& options) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", i, " is ", c10::toString(params[i].scalar_type()), ", not float32"));
    }
    if (params[i].device() != params[0].device()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " is on ", params[i].device().str(),
                                                     ", parameter 0 on ", params[0].device().str()));
    }
    offsets.push_back(total);
    total += (params[i].numel() + kFlatAlignment - 1) / kFlatAlignment * kFlatAlignment;
  }
  torch::NoGradGuard no_grad;
  const torch::TensorOptions opts = options.dtype(torch::kFloat32);
  FlatParameters flat{torch::zeros({total}, opts), torch::zeros({total}, opts)};
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor param = params[i];  // a handle on the same parameter: set_data changes it in place
    const int64_t n = param.numel();
    torch::Tensor value = flat.values.narrow(0, offsets[i], n).view(param.sizes());
    value.copy_(param.detach());
    param.set_data(value);
    param.mutable_grad() = flat.grads.narrow(0, offsets[i], n).view(param.sizes());
  }
  return flat;
}

}  // namespace dtrain::worker
