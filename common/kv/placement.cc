#include "common/kv/placement.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_map.h"

namespace dtrain::kv {

Placement ComputePlacement(const std::vector<int64_t>& param_elems, int num_servers, int64_t max_chunk_elems) {
  Placement p;
  p.by_server.resize(num_servers);
  p.elems_per_server.assign(num_servers, 0);

  // Chunked tensors first, round-robin with a rotating start.
  int rotate = 0;
  std::vector<int> whole;
  for (int i = 0; i < static_cast<int>(param_elems.size()); ++i) {
    const int64_t n = param_elems[i];
    if (n <= max_chunk_elems) {
      whole.push_back(i);
      continue;
    }
    int chunk = 0;
    for (int64_t off = 0; off < n; off += max_chunk_elems, ++chunk) {
      const int64_t len = std::min(max_chunk_elems, n - off);
      const int server = (rotate + chunk) % num_servers;
      p.slices.push_back({MakeKey(i, chunk), i, off, len, server});
      p.elems_per_server[server] += len;
    }
    rotate = (rotate + chunk) % num_servers;
  }
  // Whole tensors, largest first, to the least-loaded server (stable by index).
  std::stable_sort(whole.begin(), whole.end(), [&](int a, int b) { return param_elems[a] > param_elems[b]; });
  for (int i : whole) {
    const int server = static_cast<int>(std::min_element(p.elems_per_server.begin(), p.elems_per_server.end()) -
                                        p.elems_per_server.begin());
    p.slices.push_back({MakeKey(i, 0), i, 0, param_elems[i], server});
    p.elems_per_server[server] += param_elems[i];
  }
  std::sort(p.slices.begin(), p.slices.end(), [](const KeySlice& a, const KeySlice& b) {
    return a.param_index != b.param_index ? a.param_index < b.param_index : a.offset < b.offset;
  });
  for (int s = 0; s < static_cast<int>(p.slices.size()); ++s) {
    p.by_server[p.slices[s].server].push_back(s);
  }
  return p;
}

ChunkAdvice SuggestChunkElems(const std::vector<int64_t>& param_elems, const Placement& placement,
                              int64_t max_chunk_elems) {
  ChunkAdvice advice;
  const auto& per = placement.elems_per_server;
  if (per.size() < 2) return advice;
  advice.total_elems = std::accumulate(per.begin(), per.end(), int64_t{0});
  const auto busiest = std::max_element(per.begin(), per.end());
  advice.busiest_server = static_cast<int>(busiest - per.begin());
  const auto servers = static_cast<int64_t>(per.size());
  if (advice.total_elems == 0) return advice;
  advice.busiest_share = static_cast<double>(*busiest) / static_cast<double>(advice.total_elems);
  if (*busiest * 4 * servers <= advice.total_elems * 5) return advice;  // within 1.25x of even
  int64_t largest_whole = 0;
  for (int64_t n : param_elems) {
    if (n <= max_chunk_elems) largest_whole = std::max(largest_whole, n);
  }
  const int64_t share = (largest_whole + 4 * servers - 1) / (4 * servers);
  const int64_t bound = std::max<int64_t>(1024, (share + 1023) / 1024 * 1024);
  if (bound < max_chunk_elems && bound < largest_whole) advice.bound = bound;
  return advice;
}

bool HasLargeTensor(const std::vector<int64_t>& param_elems) {
  return std::any_of(param_elems.begin(), param_elems.end(), [](int64_t n) { return n > kMaxChunkElems; });
}

int64_t LargeModelChunkElems(int num_servers) {
  int64_t bound = kLargeModelChunkElems;
  // The largest power of two at most kLargeModelChunkElems * 2 / num_servers.
  while (bound > kMinLargeModelChunkElems && bound * num_servers > 2 * kLargeModelChunkElems) bound /= 2;
  return bound;
}

int64_t AutoChunkElems(const std::vector<int64_t>& param_elems, int num_servers) {
  if (HasLargeTensor(param_elems)) return LargeModelChunkElems(num_servers);
  const ChunkAdvice advice =
      SuggestChunkElems(param_elems, ComputePlacement(param_elems, num_servers, kMaxChunkElems), kMaxChunkElems);
  return advice.bound > 0 ? advice.bound : kMaxChunkElems;
}

namespace {

bool CutsInto(const std::vector<int64_t>& param_elems, int64_t max_chunk_elems,
              const absl::flat_hash_map<uint64_t, int64_t>& state_size_of) {
  // Keys do not depend on the number of servers (see the top of placement.h).
  const Placement p = ComputePlacement(param_elems, 1, max_chunk_elems);
  if (p.slices.size() != state_size_of.size()) return false;
  int64_t per_elem = -1;
  for (const KeySlice& s : p.slices) {
    const auto it = state_size_of.find(s.key);
    if (it == state_size_of.end() || it->second % s.length != 0) return false;
    if (per_elem >= 0 && it->second / s.length != per_elem) return false;
    per_elem = it->second / s.length;
  }
  return true;
}

}  // namespace

int64_t FindChunkElems(const std::vector<int64_t>& param_elems, const std::vector<uint64_t>& keys,
                       const std::vector<int64_t>& state_sizes) {
  if (keys.size() != state_sizes.size()) return 0;
  absl::flat_hash_map<uint64_t, int64_t> state_size_of;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!state_size_of.emplace(keys[i], state_sizes[i]).second) return 0;
  }
  // Many server counts give the same bound (a large model's is the same for all): try each once.
  std::vector<int64_t> candidates = {kMaxChunkElems};
  for (int servers = 1; servers <= kMaxAutoServers; ++servers) {
    const int64_t bound = AutoChunkElems(param_elems, servers);
    if (std::find(candidates.begin(), candidates.end(), bound) == candidates.end()) candidates.push_back(bound);
  }
  for (int64_t bound : candidates) {
    if (CutsInto(param_elems, bound, state_size_of)) return bound;
  }
  return 0;
}

}  // namespace dtrain::kv
