// Which network to build, as flags and checkpoint files name it: the network's name and,
// for the mlp, the widths of its hidden layers, for the CIFAR-style resnet its depth. No LibTorch here, so that flag
// parsing, checkpoint files and their tests need none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain::models {

struct NetworkSpec {
  std::string name = "mlp";     // one of KnownNetworks()
  std::vector<int64_t> hidden;  // mlp: hidden layer widths, input side first; else empty
  // resnet: the depth 6n+2 (20, 56, 110: n basic blocks per stage); 0 for the other
  // networks, and for a resnet before ResolveNetworkSpec (which makes it 20).
  int num_layers = 0;
};

// "mlp", "lenet", "resnet" (CIFAR-style ResNet-(6n+2)), "resnet18".
std::vector<std::string> KnownNetworks();

// MXNet's mlp (example/image-classification/symbols/mlp.py): {128, 64}.
std::vector<int64_t> DefaultMlpHidden();

// Limits that stop a typo from building a network that cannot fit in memory.
inline constexpr int kMaxHiddenLayers = 16;
inline constexpr int64_t kMaxHiddenWidth = 65536;
// Weights and biases of all layers together: 2^28 floats (1 GiB).
inline constexpr int64_t kMaxParameters = int64_t{1} << 28;
// resnet depths: 6n+2 for n in [1, 200] (He et al. 2016 go to 1202).
inline constexpr int kDefaultResNetLayers = 20;
inline constexpr int kMaxResNetLayers = 1202;

// "2048,2048" -> {2048, 2048}. INVALID_ARGUMENT saying what is wrong with the text
// (empty, an empty or non-integer item, a width out of [1, kMaxHiddenWidth], more than
// kMaxHiddenLayers items).
absl::StatusOr<std::vector<int64_t>> ParseHiddenList(const std::string& text);

// "2048,2048".
std::string HiddenText(const std::vector<int64_t>& hidden);

// The spec for `name` with `hidden` and `num_layers` checked and defaults filled in: an
// mlp without hidden widths gets DefaultMlpHidden(), a resnet without a depth 20;
// hidden widths for a network without hidden layers, a depth for any network but the
// resnet (resnet18 accepts 18), a resnet depth that is not 6n+2 in [8, 1202], an
// unknown name, bad widths, or more than kMaxParameters parameters (for `inputs` input
// values and `num_classes` outputs) are INVALID_ARGUMENT naming the problem.
absl::StatusOr<NetworkSpec> ResolveNetworkSpec(const std::string& name, const std::vector<int64_t>& hidden,
                                               int64_t inputs = 28 * 28, int64_t num_classes = 10, int num_layers = 0);

}  // namespace dtrain::models
