#include "services/worker/dataset.h"

#include <algorithm>
#include <numeric>

namespace dtrain::worker {

TensorSet ToTensors(const data::ImageSet& set, int64_t limit) {
  const int64_t n = (limit > 0 && limit < set.count) ? limit : set.count;
  TensorSet out;
  // from_blob does not copy; .to() makes the owned float tensor in one pass.
  auto pixels = torch::from_blob(const_cast<uint8_t*>(set.pixels.data()), {n, 1, set.rows, set.cols},
                                 torch::kUInt8);
  out.images = pixels.to(torch::kFloat32).div_(255.0f);
  auto labels = torch::from_blob(const_cast<uint8_t*>(set.labels.data()), {n}, torch::kUInt8);
  out.labels = labels.to(torch::kInt64);
  return out;
}

TensorSet Partition(const TensorSet& all, int rank, int num_workers) {
  const int64_t per_worker = all.size() / num_workers;
  auto idx = torch::arange(rank, per_worker * num_workers, num_workers, torch::kInt64);
  return {all.images.index_select(0, idx), all.labels.index_select(0, idx)};
}

TensorSet EvalPart(const TensorSet& all, int rank, int num_workers) {
  const int64_t n = all.size();
  const int64_t begin = n * rank / num_workers;
  const int64_t end = n * (rank + 1) / num_workers;
  return {all.images.narrow(0, begin, end - begin), all.labels.narrow(0, begin, end - begin)};
}

std::vector<int64_t> EpochOrder(int64_t n, int64_t seed, int64_t epoch, int rank) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::seed_seq seq{static_cast<uint64_t>(seed), static_cast<uint64_t>(epoch), static_cast<uint64_t>(rank)};
  std::mt19937_64 rng(seq);
  // Fisher-Yates by hand: std::shuffle's use of the engine is implementation-defined.
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace dtrain::worker
