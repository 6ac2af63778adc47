#include "services/worker/dataset.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dtrain::worker {

TensorSet ToTensors(const data::ImageSet& set, int64_t limit) {
  const int64_t n = (limit > 0 && limit < set.count) ? limit : set.count;
  TensorSet out;
  // from_blob does not copy; .to() makes the owned float tensor in one pass.
  auto pixels =
      torch::from_blob(const_cast<uint8_t*>(set.pixels.data()), {n, set.channels, set.rows, set.cols}, torch::kUInt8);
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

std::pair<torch::Tensor, torch::Tensor> ChannelStats(const torch::Tensor& images) {
  const int64_t channels = images.size(1);
  // [C, N*H*W] in double: sums over millions of pixels lose nothing that matters, and a
  // sequential loop over a contiguous copy fixes the order of the additions.
  torch::Tensor planes = images.transpose(0, 1).reshape({channels, -1}).to(torch::kFloat64).contiguous();
  const int64_t per_channel = planes.size(1);
  torch::Tensor mean = torch::empty({channels}, torch::kFloat32);
  torch::Tensor std = torch::empty({channels}, torch::kFloat32);
  for (int64_t c = 0; c < channels; ++c) {
    const double* v = planes.data_ptr<double>() + c * per_channel;
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < per_channel; ++i) sum += v[i];
    const double m = per_channel > 0 ? sum / static_cast<double>(per_channel) : 0;
    for (int64_t i = 0; i < per_channel; ++i) sum_sq += (v[i] - m) * (v[i] - m);
    const double s = per_channel > 0 ? std::sqrt(sum_sq / static_cast<double>(per_channel)) : 0;
    mean.data_ptr<float>()[c] = static_cast<float>(m);
    std.data_ptr<float>()[c] = static_cast<float>(s > 1e-6 ? s : 1.0);
  }
  return {mean, std};
}

torch::Tensor AugmentBatch(const torch::Tensor& batch, int64_t pad, int64_t seed, int64_t epoch, int rank,
                           int64_t batch_index) {
  const int64_t b = batch.size(0), h = batch.size(2), w = batch.size(3);
  // A fourth seed word keeps each batch's draws apart from EpochOrder's stream.
  std::seed_seq seq{static_cast<uint64_t>(seed), static_cast<uint64_t>(epoch), static_cast<uint64_t>(rank),
                    static_cast<uint64_t>(batch_index), uint64_t{0x61756701}};
  std::mt19937_64 rng(seq);
  torch::Tensor padded = torch::constant_pad_nd(batch, {pad, pad, pad, pad}, 0);
  torch::Tensor out = torch::empty_like(batch);
  for (int64_t i = 0; i < b; ++i) {
    // Explicit modulo, not std::uniform_int_distribution (implementation-defined draws).
    const int64_t dy = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * pad + 1));
    const int64_t dx = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * pad + 1));
    const bool flip = (rng() & 1) != 0;
    torch::Tensor crop = padded[i].narrow(1, dy, h).narrow(2, dx, w);
    out[i].copy_(flip ? crop.flip({2}) : crop);
  }
  return out;
}

}  // namespace dtrain::worker
