// The worker's --gpus list, MXNet's syntax: "0,1" puts one model replica on each of
// GPUs 0 and 1 (CUDA ordinals as this process sees them, after CUDA_VISIBLE_DEVICES);
// empty means the CPU. No LibTorch here, so the flag's checks build and test fast; what
// the devices and LibTorch make of the list is gpu_devices.h's.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::worker {

// The most GPUs one worker process drives, and the highest ordinal accepted: bounds that
// no machine reaches, so that a typo ("10000") is refused by name.
inline constexpr int kMaxGpusPerWorker = 64;
inline constexpr int kMaxGpuOrdinal = 1023;

// "" (or only spaces) -> {}; "0,1" -> {0, 1}, spaces around items allowed. INVALID_ARGUMENT,
// naming the offending item: not a non-negative integer (ranges such as "0-3" included:
// MXNet's --gpus takes lists only), a repeated GPU, an empty item, too many.
absl::StatusOr<std::vector<int>> ParseGpuList(const std::string& text);

}  // namespace dtrain::worker
