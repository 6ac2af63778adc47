#include "common/job_id.h"

#include <cstdint>
#include <random>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace dtrain {

std::string NewJobId() {
  std::random_device random;
  const uint64_t bits =
      (static_cast<uint64_t>(random()) << 32) ^ random() ^ static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  return absl::StrFormat("job-%016x", bits);
}

std::string JobIdOf(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return absl::StrFormat("job-%016x", h);
}

}  // namespace dtrain
