// How a shard store merges pushes and which optimizer it runs: set once per job by
// worker 0 (ParameterServer.Configure), and compared when it is set again.
#pragma once

#include <string>

#include "common/kv/optimizer.h"

namespace dtrain::kv {

enum class MergeMode {
  // For each key and step, merge exactly one push from every worker (rank order, so
  // the sum is bit-reproducible), average, apply the optimizer once, bump the version.
  kSync,
  // Apply each push on arrival (no averaging); pulls return the current weights.
  kAsync,
};

struct StoreConfig {
  MergeMode mode = MergeMode::kSync;
  int num_workers = 1;
  OptimizerOptions optimizer;
};

const char* ModeName(MergeMode mode);  // "sync" / "async"

// What differs between two configs, e.g. "num_workers 2 vs 3; optimizer.momentum 0.9
// vs 0"; empty when they are the same.
std::string DescribeConfigDiff(const StoreConfig& a, const StoreConfig& b);

}  // namespace dtrain::kv
