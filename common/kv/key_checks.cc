#include "common/kv/key_checks.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::kv {
namespace {

// The element count of `shape`, or -1 if a dimension is negative or the product
// does not fit in an int64.
int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

absl::Status CheckNewKey(uint64_t key, const std::vector<int64_t>& shape, const float* values, int64_t numel,
                         int64_t version) {
  if (shape.size() > kMaxKeyDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", key, ": shape has ", shape.size(), " dimensions, more than ", kMaxKeyDims));
  }
  if (NumElements(shape) != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", key, ": shape ", ShapeText(shape), " does not hold ", numel, " elements"));
  }
  if (numel > 0 && values == nullptr) return absl::InvalidArgumentError(absl::StrCat("key ", key, ": no values"));
  if (version < 0) return absl::InvalidArgumentError(absl::StrCat("key ", key, ": negative version ", version));
  return absl::OkStatus();
}

int64_t KeyBytes(int64_t numel, int64_t state_floats, bool keep_previous, const GradientCodec* pull_codec) {
  const int64_t packed_bytes = pull_codec != nullptr ? pull_codec->PackedBytes(numel) : 0;
  const int64_t spare = pull_codec != nullptr && !keep_previous ? numel : 0;
  return ((keep_previous ? 2 : 1) * numel + spare + state_floats) * static_cast<int64_t>(sizeof(float)) + packed_bytes;
}

std::string PullResidualHint(bool pull_packed, int64_t have, int64_t want, int64_t numel) {
  if (pull_packed && have == want - numel) {
    return ". It has no pull residual: it was written with float32 pulls; --pull-gc-type none resumes it "
           "(a compressed --gc-type compresses the pull too unless told otherwise)";
  }
  if (!pull_packed && have == want + numel) {
    return ". It has a pull residual: resume with the --pull-gc-type it was written with";
  }
  return "";
}

}  // namespace dtrain::kv
