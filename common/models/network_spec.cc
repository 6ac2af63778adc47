#include "common/models/network_spec.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dtrain::models {

std::vector<std::string> KnownNetworks() { return {"mlp", "lenet", "resnet", "resnet18"}; }

std::vector<int64_t> DefaultMlpHidden() { return {128, 64}; }

std::string HiddenText(const std::vector<int64_t>& hidden) { return absl::StrJoin(hidden, ","); }

absl::StatusOr<std::vector<int64_t>> ParseHiddenList(const std::string& text) {
  const std::string want = absl::StrCat("want comma-separated layer widths such as 2048,2048 (1 to ", kMaxHiddenLayers,
                                        " integers in [1, ", kMaxHiddenWidth, "])");
  std::vector<int64_t> out;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("empty list: ", want));
  }
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int64_t v = 0;
    if (part.empty()) return absl::InvalidArgumentError(absl::StrCat("'", text, "' has an empty item: ", want));
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' in '", text, "' is not an integer: ", want));
    }
    if (v < 1 || v > kMaxHiddenWidth) {
      return absl::InvalidArgumentError(absl::StrCat("width ", v, " in '", text, "' is out of range: ", want));
    }
    out.push_back(v);
  }
  if (out.size() > static_cast<size_t>(kMaxHiddenLayers)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' has ", out.size(), " layers: ", want));
  }
  return out;
}

absl::StatusOr<NetworkSpec> ResolveNetworkSpec(const std::string& name, const std::vector<int64_t>& hidden,
                                               int64_t inputs, int64_t num_classes, int num_layers) {
  NetworkSpec spec;
  spec.name = name;
  const std::vector<std::string> known = KnownNetworks();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown network \"", name, "\" (known: ", absl::StrJoin(known, ", "), ")"));
  }
  if (name != "mlp" && !hidden.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", name, " network has no configurable hidden layers (got ",
                                                   HiddenText(hidden), "); hidden widths are for the mlp"));
  }
  if (name == "resnet") {
    spec.num_layers = num_layers == 0 ? kDefaultResNetLayers : num_layers;
    if (spec.num_layers < 8 || spec.num_layers > kMaxResNetLayers || (spec.num_layers - 2) % 6 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("resnet: ", spec.num_layers, " layers is not 6n+2 in [8, ",
                                                     kMaxResNetLayers, "] (20, 56, 110, ...)"));
    }
    return spec;
  }
  if (num_layers != 0 && !(name == "resnet18" && num_layers == 18)) {
    return absl::InvalidArgumentError(absl::StrCat("the ", name, " network has a fixed depth (got ", num_layers,
                                                   " layers); the depth is for resnet"));
  }
  if (name != "mlp") return spec;
  spec.hidden = hidden.empty() ? DefaultMlpHidden() : hidden;
  if (spec.hidden.size() > static_cast<size_t>(kMaxHiddenLayers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mlp: ", spec.hidden.size(), " hidden layers, at most ", kMaxHiddenLayers));
  }
  int64_t params = 0;
  int64_t in = inputs;
  for (int64_t w : spec.hidden) {
    if (w < 1 || w > kMaxHiddenWidth) {
      return absl::InvalidArgumentError(absl::StrCat("mlp: hidden width ", w, " is not in [1, ", kMaxHiddenWidth, "]"));
    }
    params += in * w + w;
    in = w;
  }
  params += in * num_classes + num_classes;
  if (params > kMaxParameters) {
    return absl::InvalidArgumentError(absl::StrCat("mlp with hidden layers ", HiddenText(spec.hidden), " has ", params,
                                                   " parameters, more than the limit of ", kMaxParameters,
                                                   " (1 GiB of float32)"));
  }
  return spec;
}

}  // namespace dtrain::models
