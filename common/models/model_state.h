// What of a network a checkpoint holds, and how its batch-norm statistics are made.
//
// A network's state is its parameters (trained through the kvstore: every worker pushes
// their gradients and pulls the servers' weights) and its float buffers: the resnets'
// input normalisation and batch norm's running mean and variance. Buffers are not
// gradients and never become kvstore keys. Batch norm's running statistics would
// otherwise be per worker (each sees its own batches) and lost with a worker that dies;
// instead they are recomputed from the weights alone at the end of every epoch
// (RecalibrateBatchNorm, "precise BN"), so every worker, a resumed run and a rejoined
// worker hold the same statistics, bit for bit, and checkpoints and inference use them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "common/models/models.h"

namespace dtrain::models {

// The parameters, then the float32 buffers (batch norm's num_batches_tracked, an int64
// counter that evaluation does not read, is left out), in the module's order: what a
// .params file holds, in its order.
std::vector<std::pair<std::string, torch::Tensor>> CheckpointTensors(Network& net);

// True when the network has batch-norm layers (their running statistics are state).
bool HasBatchNorm(Network& net);

// Sets every batch-norm layer's running mean and variance to the average over `images`'
// batches of `batch_size` (whole batches only; at least one: fewer images than a batch
// make one smaller batch) of the batch statistics, computed by forward passes in
// training mode without gradients: a function of the weights and the images only. The
// layers' momentum and the network's training mode are as before afterwards. Nothing
// happens for a network without batch norm.
void RecalibrateBatchNorm(Network& net, const torch::Tensor& images, int64_t batch_size);

}  // namespace dtrain::models
