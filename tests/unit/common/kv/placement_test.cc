#include "common/kv/placement.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using SliceKey = std::tuple<uint64_t, int, int64_t, int64_t>;  // key, param, offset, length

std::vector<SliceKey> Cuts(const Placement& p) {
  std::vector<SliceKey> out;
  for (const KeySlice& s : p.slices) out.emplace_back(s.key, s.param_index, s.offset, s.length);
  return out;
}

TEST(PlacementTest, KeyEncodingRoundTrips) {
  const uint64_t key = MakeKey(300, 17);
  EXPECT_EQ(KeyParam(key), 300);
  EXPECT_EQ(KeyChunk(key), 17);
  EXPECT_NE(MakeKey(1, 0), MakeKey(0, 1));
}

TEST(PlacementTest, ChunksNeverExceedMaxAndCoverEveryElementOnce) {
  const std::vector<int64_t> params = {10, 25, 7, 8, 9, 1, 33};
  const int64_t max_chunk = 8;
  const Placement p = ComputePlacement(params, 3, max_chunk);
  std::map<int, std::vector<const KeySlice*>> by_param;
  for (const KeySlice& s : p.slices) {
    EXPECT_LE(s.length, max_chunk) << "key " << s.key;
    EXPECT_GT(s.length, 0);
    EXPECT_EQ(KeyParam(s.key), s.param_index);
    by_param[s.param_index].push_back(&s);
  }
  ASSERT_EQ(by_param.size(), params.size());
  for (const auto& [param, slices] : by_param) {
    int64_t next = 0;  // slices are ordered by offset and must tile [0, n) exactly
    for (const KeySlice* s : slices) {
      EXPECT_EQ(s->offset, next) << "param " << param;
      next = s->offset + s->length;
    }
    EXPECT_EQ(next, params[param]) << "param " << param;
  }
  // 25 elements in chunks of 8: 8, 8, 8, 1.
  EXPECT_EQ(by_param[1].size(), 4u);
  EXPECT_EQ(by_param[1].back()->length, 1);
  EXPECT_EQ(by_param[3].size(), 1u);  // exactly max stays whole
}

TEST(PlacementTest, ServerTablesAgreeWithSlices) {
  const Placement p = ComputePlacement({100, 5, 70, 3, 3}, 2, 32);
  std::vector<int64_t> elems(2, 0);
  size_t listed = 0;
  for (int server = 0; server < 2; ++server) {
    for (int idx : p.by_server[server]) {
      EXPECT_EQ(p.slices[idx].server, server);
      elems[server] += p.slices[idx].length;
      ++listed;
    }
  }
  EXPECT_EQ(listed, p.slices.size());
  EXPECT_EQ(elems, p.elems_per_server);
}

TEST(PlacementTest, SpreadsBytesEvenly) {
  // Twelve equal tensors over four servers: three each.
  const Placement even = ComputePlacement(std::vector<int64_t>(12, 100), 4, 1000);
  EXPECT_EQ(even.elems_per_server, std::vector<int64_t>(4, 300));
  // A chunked tensor plus small ones: no server more than one chunk above another.
  const Placement mixed = ComputePlacement({1000, 90, 60, 50, 40, 30, 20}, 3, 128);
  const auto [lo, hi] = std::minmax_element(mixed.elems_per_server.begin(), mixed.elems_per_server.end());
  EXPECT_LE(*hi - *lo, 128);
}

TEST(PlacementTest, IsDeterministic) {
  const std::vector<int64_t> params = {4096, 17, 17, 300, 5000, 1};
  const Placement a = ComputePlacement(params, 3, 1024);
  const Placement b = ComputePlacement(params, 3, 1024);
  ASSERT_EQ(a.slices.size(), b.slices.size());
  for (size_t i = 0; i < a.slices.size(); ++i) {
    EXPECT_EQ(a.slices[i].key, b.slices[i].key);
    EXPECT_EQ(a.slices[i].server, b.slices[i].server);
  }
}

TEST(PlacementTest, KeysDoNotDependOnServerCount) {
  const std::vector<int64_t> params = {4096, 17, 17, 300, 5000, 1, 1025};
  const std::vector<SliceKey> one = Cuts(ComputePlacement(params, 1, 1024));
  for (int servers : {2, 3, 5, 8}) {
    EXPECT_EQ(Cuts(ComputePlacement(params, servers, 1024)), one) << servers << " servers";
  }
}

TEST(PlacementTest, ChunkedTensorUsesEveryServer) {
  const Placement p = ComputePlacement({8 * 10}, 4, 10);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(p.elems_per_server[s], 20) << "server " << s;
}

// LeNet's parameters: with the default bound fc1 (400,000 elements) sits whole on one
// of two servers, 93% of the model; the advice cuts it into 4 keys per server, and
// that placement is even enough to need no more advice.
TEST(PlacementTest, SuggestsABoundThatSpreadsLeNetsFc1) {
  const std::vector<int64_t> lenet = {500, 20, 25000, 50, 400000, 500, 5000, 10};
  Placement p = ComputePlacement(lenet, 2);
  ASSERT_EQ(p.elems_per_server[0], 400000);  // fc1 alone; the rest on server 1
  const ChunkAdvice advice = SuggestChunkElems(lenet, p, kMaxChunkElems);
  const int64_t bound = advice.bound;
  EXPECT_EQ(bound, 50176);  // 400000 / 8 rounded up to a multiple of 1024
  EXPECT_EQ(advice.busiest_server, 0);
  EXPECT_EQ(advice.total_elems, 431080);
  EXPECT_NEAR(advice.busiest_share, 400000.0 / 431080, 1e-9);
  Placement better = ComputePlacement(lenet, 2, bound);
  const int64_t total = 431080;
  EXPECT_LE(*std::max_element(better.elems_per_server.begin(), better.elems_per_server.end()) * 4 * 2, total * 5);
  EXPECT_EQ(SuggestChunkElems(lenet, better, bound).bound, 0);
  // One server, or an even placement: nothing to suggest.
  EXPECT_EQ(SuggestChunkElems(lenet, ComputePlacement(lenet, 1), kMaxChunkElems).bound, 0);
  const std::vector<int64_t> even = {1000, 1000, 1000, 1000};
  EXPECT_EQ(SuggestChunkElems(even, ComputePlacement(even, 2), kMaxChunkElems).bound, 0);
  // A tensor too small to cut below 1024 elements gets no advice either.
  const std::vector<int64_t> tiny = {1000, 10};
  EXPECT_EQ(SuggestChunkElems(tiny, ComputePlacement(tiny, 2, 1024), 1024).bound, 0);
}

// No bound given: MXNet's 2^20 where that spreads the model, the advice's bound where it
// does not; the same on every call (every worker and replacement computes it).
TEST(PlacementTest, AutoBoundIsTheAdviceOnlyWhereOneServerWouldCarryTheModel) {
  const std::vector<int64_t> lenet = {500, 20, 25000, 50, 400000, 500, 5000, 10};
  EXPECT_EQ(AutoChunkElems(lenet, 1), kMaxChunkElems);
  EXPECT_EQ(AutoChunkElems(lenet, 2), 50176);
  EXPECT_EQ(AutoChunkElems(lenet, 4), 25600);  // 400000 / 16, rounded up to 1024
  const std::vector<int64_t> even = {1000, 1000, 1000, 1000};
  EXPECT_EQ(AutoChunkElems(even, 2), kMaxChunkElems);
  // A tensor MXNet would cut (the mlp 2048,2048's fc2: 4,194,304): keys of 512 KB, also
  // on one server, where 4 MB keys would leave the pulls a whole key behind the pushes.
  const std::vector<int64_t> wide_mlp = {1605632, 2048, 4194304, 2048, 20480, 10};
  for (int servers : {1, 2}) EXPECT_EQ(AutoChunkElems(wide_mlp, servers), kLargeModelChunkElems) << servers;
  // Smaller with more servers, whose streams share each worker's link: 2/S of that, down to
  // a floor.
  for (int servers : {3, 4}) EXPECT_EQ(AutoChunkElems(wide_mlp, servers), 65536) << servers;
  for (int servers : {5, 8, 64}) EXPECT_EQ(AutoChunkElems(wide_mlp, servers), kMinLargeModelChunkElems) << servers;
  EXPECT_EQ(kMinLargeModelChunkElems, 32768);
  EXPECT_EQ(AutoChunkElems({kMaxChunkElems, 10}, 1), kMaxChunkElems) << "not above the bound";
}

// A resume that names no bound finds the one its checkpoint's keys were cut with, from
// the keys and their optimizer states' sizes, whatever the number of servers now.
TEST(PlacementTest, FindsTheBoundACheckpointWasCutWith) {
  const std::vector<int64_t> lenet = {500, 20, 25000, 50, 400000, 500, 5000, 10};
  auto keys_of = [&](int64_t bound, int slots, std::vector<uint64_t>* keys, std::vector<int64_t>* sizes) {
    keys->clear();
    sizes->clear();
    for (const KeySlice& s : ComputePlacement(lenet, 3, bound).slices) {
      keys->push_back(s.key);
      sizes->push_back(slots * s.length);
    }
  };
  std::vector<uint64_t> keys;
  std::vector<int64_t> sizes;
  for (int slots : {0, 1, 2}) {                     // sgd, sgd with momentum, adam
    keys_of(kMaxChunkElems, slots, &keys, &sizes);  // written before the bound was chosen
    EXPECT_EQ(FindChunkElems(lenet, keys, sizes), kMaxChunkElems) << slots;
    keys_of(AutoChunkElems(lenet, 2), slots, &keys, &sizes);  // written by 2 servers, resumed by any
    EXPECT_EQ(FindChunkElems(lenet, keys, sizes), 50176) << slots;
    keys_of(AutoChunkElems(lenet, 4), slots, &keys, &sizes);
    EXPECT_EQ(FindChunkElems(lenet, keys, sizes), 25600) << slots;
  }
  // The wide mlp's 512 KB keys.
  const std::vector<int64_t> wide_mlp = {1605632, 2048, 4194304, 2048, 20480, 10};
  std::vector<uint64_t> mlp_keys;
  std::vector<int64_t> mlp_sizes;
  for (const KeySlice& s : ComputePlacement(wide_mlp, 2, kLargeModelChunkElems).slices) {
    mlp_keys.push_back(s.key);
    mlp_sizes.push_back(s.length);
  }
  EXPECT_EQ(FindChunkElems(wide_mlp, mlp_keys, mlp_sizes), kLargeModelChunkElems);
  // Cut for 4 and for 8 servers, resumed on any number.
  for (int written_by : {4, 8}) {
    const int64_t bound = AutoChunkElems(wide_mlp, written_by);
    mlp_keys.clear();
    mlp_sizes.clear();
    for (const KeySlice& s : ComputePlacement(wide_mlp, 2, bound).slices) {
      mlp_keys.push_back(s.key);
      mlp_sizes.push_back(s.length);
    }
    EXPECT_EQ(FindChunkElems(wide_mlp, mlp_keys, mlp_sizes), bound) << written_by;
  }
  // 50000 cuts fc1 into the same 8 keys as 50176, but not the same slices: the states'
  // sizes tell them apart (with no state, either cut restores the same).
  keys_of(50000, 1, &keys, &sizes);
  EXPECT_EQ(FindChunkElems(lenet, keys, sizes), 0);
  keys_of(20000, 1, &keys, &sizes);  // a bound of the user's own: 20 keys for fc1
  EXPECT_EQ(FindChunkElems(lenet, keys, sizes), 0);
  // Another model's keys, or a key missing.
  keys_of(kMaxChunkElems, 1, &keys, &sizes);
  keys.pop_back();
  sizes.pop_back();
  EXPECT_EQ(FindChunkElems(lenet, keys, sizes), 0);
  EXPECT_EQ(FindChunkElems({100, 10}, {MakeKey(0, 0)}, {100}), 0);
}

}  // namespace
}  // namespace dtrain::kv
