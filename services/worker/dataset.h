// Images as LibTorch tensors, each worker's part of the training set, and the
// per-batch augmentation.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <torch/torch.h>

#include "common/data/image_set.h"

namespace dtrain::worker {

struct TensorSet {
  torch::Tensor images;  // float32 [N, C, rows, cols] in [0, 1]
  torch::Tensor labels;  // int64 [N]
  int64_t size() const { return labels.size(0); }
};

// Uses the first `limit` examples (all when limit <= 0 or larger than the set).
TensorSet ToTensors(const data::ImageSet& set, int64_t limit = 0);

// Worker `rank` of `num_workers` takes examples rank, rank+W, rank+2W ... of the
// first floor(N/W)*W, so every worker has the same count and the same number of
// batches per epoch (a sync step needs every worker).
TensorSet Partition(const TensorSet& all, int rank, int num_workers);

// Worker `rank`'s part of the test set: examples [rank*N/W, (rank+1)*N/W),
// contiguous, so the W parts cover the set exactly once whatever N (sizes differ by at
// most one). Each worker evaluates its part and the counts are summed (MXNet's
// num_parts/part_index on the validation iterator), so the combined accuracy is the
// whole set's.
TensorSet EvalPart(const TensorSet& all, int rank, int num_workers);

// A fresh order of [0, n) for an epoch; depends only on (seed, epoch, rank), so a
// resumed run shuffles exactly as an uninterrupted one.
std::vector<int64_t> EpochOrder(int64_t n, int64_t seed, int64_t epoch, int rank);

// Per-channel mean and standard deviation (population) of `images` [N, C, H, W], as
// float [C] each; a channel with no spread gets std 1. Computed in double, in one fixed
// order, so every worker gets the same values from the same images.
std::pair<torch::Tensor, torch::Tensor> ChannelStats(const torch::Tensor& images);

// MXNet's train_cifar10.py augmentation (rand_crop + rand_mirror with pad 4): each image
// of `batch` [B, C, H, W] is padded with `pad` zero pixels on every side, cropped back to
// H x W at a random offset, and flipped left-right with probability 1/2. The randomness
// depends only on (seed, epoch, rank, batch_index), like EpochOrder, so a resumed or
// rejoined worker that redoes a batch augments it exactly as before.
torch::Tensor AugmentBatch(const torch::Tensor& batch, int64_t pad, int64_t seed, int64_t epoch, int rank,
                           int64_t batch_index);

}  // namespace dtrain::worker
