#include "services/worker/gpu_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dtrain::worker {

absl::StatusOr<std::vector<int>> ParseGpuList(const std::string& text) {
  std::vector<int> gpus;
  if (absl::StripAsciiWhitespace(text).empty()) return gpus;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" has an empty item"));
    int g = -1;
    // SimpleAtoi takes a leading '+' and '-'; an ordinal is digits only.
    const bool digits = std::all_of(item.begin(), item.end(), [](char c) { return absl::ascii_isdigit(c); });
    if (!digits || !absl::SimpleAtoi(item, &g) || g > kMaxGpuOrdinal) {
      const bool range = item.front() != '-' && absl::StrContains(item, '-');
      const std::string hint = range ? " (list each GPU: 0,1,2,3; ranges are not taken)" : "";
      return absl::InvalidArgumentError(
          absl::StrCat("\"", item, "\" is not a GPU ordinal (0..", kMaxGpuOrdinal, ")", hint));
    }
    if (std::find(gpus.begin(), gpus.end(), g) != gpus.end()) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " is listed twice (one replica per GPU)"));
    }
    gpus.push_back(g);
    if (static_cast<int>(gpus.size()) > kMaxGpusPerWorker) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxGpusPerWorker, " GPUs"));
    }
  }
  return gpus;
}

}  // namespace dtrain::worker
