// Key placement: how parameter tensors are cut into keys and spread over servers.
//
// Every node computes the same placement from the same inputs (the ordered list of
// parameter sizes and the number of servers), so no placement table is ever sent.
//
// - A tensor larger than kMaxChunkElems is cut into chunks of kMaxChunkElems
//   (the last one shorter); chunk j of a tensor goes to server (first + j) % S, where
//   `first` rotates with each chunked tensor, so big tensors spread over all servers.
// - Smaller tensors stay whole and go, largest first, to the server with the fewest
//   elements so far (ties: lowest rank), balancing bytes across servers.
//
// Chunk boundaries do not depend on the number of servers, so a key (and its saved
// optimizer state) means the same slice whatever the cluster size.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::kv {

// 4 MB of float32.
inline constexpr int64_t kMaxChunkElems = int64_t{1} << 20;

// key = param_index << 24 | chunk_index.
inline constexpr uint64_t MakeKey(int param_index, int chunk_index) {
  return (static_cast<uint64_t>(param_index) << 24) | static_cast<uint64_t>(chunk_index);
}
inline constexpr int KeyParam(uint64_t key) { return static_cast<int>(key >> 24); }
inline constexpr int KeyChunk(uint64_t key) { return static_cast<int>(key & 0xFFFFFF); }

struct KeySlice {
  uint64_t key;
  int param_index;
  int64_t offset;  // in elements, into the flattened tensor
  int64_t length;  // in elements
  int server;      // rank of the server holding it
};

struct Placement {
  std::vector<KeySlice> slices;             // ordered by (param_index, offset)
  std::vector<std::vector<int>> by_server;  // indices into `slices`, per server
  std::vector<int64_t> elems_per_server;
};

// `param_elems[i]` is the element count of parameter i. Requires num_servers >= 1.
Placement ComputePlacement(const std::vector<int64_t>& param_elems, int num_servers,
                           int64_t max_chunk_elems = kMaxChunkElems);

// When the busiest server holds over 1.25x its even share of the elements (a tensor
// below the bound sits whole on one server: LeNet's fc1 with the default bound puts 93%
// of the model, and so of every step's traffic, on one of two servers), a smaller
// max_chunk_elems that cuts the largest whole tensor into 4 keys per server (rounded up
// to a multiple of 1024): several keys per server let answers follow pushes key by key
// (LeNet at 1 Gbit/s was fastest so, docs/benchmarks-network.md). The bound decides the
// keys, which every worker and a resume must share: AutoChunkElems below applies it
// when no --bigarray-bound is given; with one given it is advice.
struct ChunkAdvice {
  int64_t bound = 0;  // 0: the placement is even enough, or no smaller bound helps
  int busiest_server = 0;
  double busiest_share = 0;  // of all elements, 0..1
  int64_t total_elems = 0;
};
ChunkAdvice SuggestChunkElems(const std::vector<int64_t>& param_elems, const Placement& placement,
                              int64_t max_chunk_elems);

// The bound a run cuts keys with when none is given (--bigarray-bound 0, the default).
// A model with a tensor above kMaxChunkElems, which MXNet would cut into 4 MB keys, gets
// keys of kLargeModelChunkElems: a server answers a key once every worker's push of it
// is in, so 4 MB keys leave the pulls trailing the pushes by a whole key (0.13 s at
// 250 Mbit/s). The mlp 2048,2048 at 1 Gbit/s went from 388 to 511 samples/s with 512 KB
// keys, and lost 1% where the links are unlimited (65536: +37% and -3%; 32768: -18%
// there; docs/benchmarks-network.md). Other models: kMaxChunkElems unless that placement
// loads one server over 1.25x its share, then SuggestChunkElems's bound. It depends only
// on the tensors' sizes and the number of servers, so every worker, and every
// replacement, computes the same.
//
// With more servers the keys get smaller: a worker's link is shared by one stream per
// server, so a key takes S times its bytes' time to reach its server, and a server answers
// only once the slowest worker's copy is in. kLargeModelChunkElems holds up to 2 servers;
// from 3 it is 2/S of that, rounded down to a power of two, at least kMinLargeModelChunkElems
// (4 workers + 4 servers at 250 Mbit/s: 264 samples/s with 131072, 280 with 65536, 284 with
// 32768; docs/benchmarks-network.md, "More workers").
inline constexpr int64_t kLargeModelChunkElems = int64_t{1} << 17;
inline constexpr int64_t kMinLargeModelChunkElems = int64_t{1} << 15;
int64_t LargeModelChunkElems(int num_servers);
// Whether some tensor is above kMaxChunkElems: AutoChunkElems's first rule.
bool HasLargeTensor(const std::vector<int64_t>& param_elems);
int64_t AutoChunkElems(const std::vector<int64_t>& param_elems, int num_servers);

// The bound a checkpoint's keys were cut with, for a resume that names none: among
// kMaxChunkElems and AutoChunkElems for 1..kMaxAutoServers servers (the cluster may have
// changed size since), the first whose keys are exactly `keys` and whose slices hold
// the same number of optimizer-state floats per element (`state_sizes[i]` for keys[i]:
// two bounds can give the same keys but not the same slices). 0 if none does.
inline constexpr int kMaxAutoServers = 256;
int64_t FindChunkElems(const std::vector<int64_t>& param_elems, const std::vector<uint64_t>& keys,
                       const std::vector<int64_t>& state_sizes);

}  // namespace dtrain::kv
