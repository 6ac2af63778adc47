// The worker's training flags, named and defaulted as MXNet's train_mnist.py / fit.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/flags.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/job_spec.h"
#include "common/kvstore_mode.h"
#include "common/models/network_spec.h"
#include "common/defaults.h"

namespace dtrain::worker {

// --connections-per-server's upper bound: past the cores of any machine we run on.
inline constexpr int64_t kMaxConnectionsPerServer = 16;

struct TrainOptions {
  std::string network = "mlp";
  std::string hidden;      // the mlp's hidden widths, "2048,2048"; empty: MXNet's 128,64
  int64_t num_layers = 0;  // the resnet's depth, 6n+2; 0: 20
  // Random crop (pad 4) + flip of the training batches: "auto" (for CIFAR-format data),
  // "on" or "off".
  std::string augment = "auto";
  int64_t num_epochs = 20;
  int64_t batch_size = 64;
  double lr = 0.05;
  double lr_factor = 0.1;
  std::vector<int64_t> lr_step_epoch_list = {10};  // --lr-step-epochs 10,20
  double mom = 0.9;
  double wd = 0.0001;
  std::string optimizer = "sgd";
  // The job's mode, staleness and step deadline, as the worker's JobSpec holds them
  // (--kv-store, --staleness, --sync-timeout; common/job_spec.h): FinishTrainFlags copies
  // them here for the trainer.
  KVStoreMode mode = kDefaultWorkerMode;
  int64_t staleness = 0;  // dist_ssp: steps ahead of the slowest worker allowed
  double sync_timeout_s = kDefaultSyncTimeoutSeconds;
  // Push each parameter's gradient from backward as soon as it is computed (dist_*).
  bool overlap = true;  // --no-overlap: the strictly sequential step
  // dist_ssp: pushes say how stale their weights were and count less for it
  // (common/kv/stale_weight.h); --no-weigh-stale: in full.
  bool weigh_stale = true;
  // Parameters with more elements are cut into keys of this many (MXNet's
  // MXNET_KVSTORE_BIGARRAY_BOUND), spread over the servers. 0: chosen by the kvstore
  // (kv::AutoChunkElems; a resume the bound its checkpoint was cut with).
  int64_t bigarray_bound = 0;
  // Connections to each parameter server (dist_*), over which the keys are spread
  // (services/worker/kv/striped_channel.h). 0: chosen by the transport
  // (DefaultConnectionsPerServer: more than one with TLS only).
  int64_t connections_per_server = 0;
  std::string model_prefix;  // empty: no checkpoints
  int64_t load_epoch = 0;    // 0: fresh start
  // Delete the prefix's checkpoints that a fresh start (all) or a resume (those after
  // --load-epoch) would otherwise be refused over: a set holds one run's epochs.
  bool overwrite_checkpoints = false;
  // Also write PREFIX-NNNN.safetensors beside each epoch's .params, for
  // tools that cannot read dtrain's own format.
  bool save_safetensors = false;
  int64_t disp_batches = 100;
  int64_t num_examples = 60000;
  int64_t num_test_examples = 0;  // 0: the whole test set
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t threads = 0;        // 0: cores / local_workers
  int64_t local_workers = 1;  // workers on this host sharing its cores (dtrain launch sets it)
  int64_t seed = 42;
  // One model replica per listed GPU ("0,1", MXNet's --gpus); empty: the CPU (docs/gpu.md).
  std::vector<int> gpu_list;
  // N model replicas on the CPU, each training on its slice of the batch: the --gpus path
  // (DeviceReplicas, local aggregation, copies to and from the host model) on a machine
  // without a GPU, for tests. 0: the one host model.
  int64_t cpu_replicas = 0;
  // Gradient compression of the pushes (MXNet's fit.py --gc-type / --gc-threshold):
  // none, 2bit, 1bit, fp16 or int8; the threshold is 2bit's quantum in MXNet's units
  // (gradients summed over the batch; the kvstore divides it by the batch size).
  // --gc-type sets compression.type; FinishTrainFlags sets compression.threshold from
  // --gc-threshold.
  double gc_threshold = 0.5;
  kv::CompressionSpec compression;
  // Compression of the pulls (dist_sync, dist_device_sync): none, fp16, int8 or 1bit
  // (kv::StoreConfig). --pull-gc-type sets it and pull_compression_given; without the
  // flag FinishTrainFlags derives it from compression.type (int8 after 2bit, 1bit or
  // int8, fp16 after fp16; none in the modes that cannot pack pulls).
  kv::CompressionType pull_compression = kv::CompressionType::kNone;
  bool pull_compression_given = false;
  // Resolved from network + hidden + num_layers.
  models::NetworkSpec network_spec;  // hidden filled in: {128, 64} for the default mlp
};

// The training flags; the job's (--kv-store, --staleness, --sync-timeout and the
// cluster's) are AddClusterFlags'.
void AddTrainFlags(FlagSet& flags, TrainOptions* out);
// Range checks after parsing, with the job's mode, staleness and step deadline taken
// from `job` (checked by CheckJobSpec): INVALID_ARGUMENT naming the flag.
absl::Status FinishTrainFlags(TrainOptions* options, const JobSpec& job);

}  // namespace dtrain::worker
