#include "common/models/models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/models/lenet.h"
#include "common/models/mlp.h"
#include "common/models/resnet.h"
#include "common/status_macros.h"

namespace dtrain::models {
namespace {

// Well above any data set we serve; stops a typo (a pixel count, say) from building a
// multi-gigabyte output layer.
constexpr int kMaxClasses = 100000;
constexpr int64_t kMaxChannels = 64;
constexpr int64_t kMaxSide = 4096;

absl::Status CheckInputShape(const std::string& network, const std::vector<int64_t>& shape) {
  const bool ok = shape.size() == 3 && shape[0] >= 1 && shape[0] <= kMaxChannels && shape[1] >= 1 &&
                  shape[1] <= kMaxSide && shape[2] >= 1 && shape[2] <= kMaxSide;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("network ", network, ": input shape [", absl::StrJoin(shape, ","),
                                                   "] is not [C,H,W] with C in [1, ", kMaxChannels,
                                                   "] and H, W in [1, ", kMaxSide, "]"));
  }
  if (network == "lenet" && (LeNetSide(shape[1]) < 1 || LeNetSide(shape[2]) < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("network lenet: its two 5x5 convolutions and 2x2 poolings need "
                     "images of at least 16x16, not ",
                     shape[1], "x", shape[2]));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> DefaultInputShape() { return {1, 28, 28}; }

absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const NetworkSpec& spec, int num_classes,
                                                       const std::vector<int64_t>& input_shape) {
  if (num_classes < 1 || num_classes > kMaxClasses) {
    return absl::InvalidArgumentError(
        absl::StrCat("network ", spec.name, ": num_classes ", num_classes, " is not in [1, ", kMaxClasses, "]"));
  }
  DTRAIN_RETURN_IF_ERROR(CheckInputShape(spec.name, input_shape));
  const int64_t channels = input_shape[0], height = input_shape[1], width = input_shape[2];
  DTRAIN_ASSIGN_OR_RETURN(
      const NetworkSpec resolved,
      ResolveNetworkSpec(spec.name, spec.hidden, channels * height * width, num_classes, spec.num_layers));
  if (resolved.name == "mlp") {
    return std::shared_ptr<Network>(std::make_shared<Mlp>(channels * height * width, resolved.hidden, num_classes));
  }
  if (resolved.name == "resnet") {
    return std::shared_ptr<Network>(std::make_shared<CifarResNet>(resolved.num_layers, channels, num_classes));
  }
  if (resolved.name == "resnet18") {
    return std::shared_ptr<Network>(std::make_shared<ResNet18>(channels, height, width, num_classes));
  }
  return std::shared_ptr<Network>(std::make_shared<LeNet>(channels, height, width, num_classes));
}

absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const std::string& name, int num_classes) {
  return CreateNetwork(NetworkSpec{name, {}}, num_classes);
}

}  // namespace dtrain::models
