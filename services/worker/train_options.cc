#include "services/worker/train_options.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_cat.h"
#include "common/kv/placement.h"
#include "common/kv/store_config.h"
#include "common/status_macros.h"
#include "services/worker/gpu_list.h"

namespace dtrain::worker {

namespace {

// --lr-step-epochs: "10,20" -> {10, 20}.
absl::StatusOr<std::vector<int64_t>> ParseEpochList(const std::string& text) {
  std::vector<int64_t> epochs;
  if (absl::Status s = ParseIntList(text, &epochs); !s.ok()) return s;
  return epochs;
}

// --gc-type, --pull-gc-type (which notes that it was given: FinishTrainFlags derives it
// from --gc-type otherwise) and --gc-threshold.
void AddCompressionFlags(FlagSet& f, TrainOptions* o) {
  AddParsedValue(f, "gc-type", &o->compression.type, kv::ParseCompressionType,
                 kv::CompressionTypeName(o->compression.type),
                 "gradient compression of the pushes (dist_* kv-stores): none, 2bit (+-threshold or 0), 1bit "
                 "(sign times the mean magnitude), fp16 or int8; what is not sent is added to the next push (2bit, "
                 "1bit: a value short of a quantum goes as one at random, in proportion, and at most one "
                 "quantum per value is owed, the rest dropped). "
                 "In dist_sync and dist_device_sync the pulls are then compressed too (int8 after 2bit, 1bit or "
                 "int8 pushes, fp16 after fp16) unless --pull-gc-type says otherwise");
  f.AddParsed(
      "pull-gc-type",
      [o](const std::string& text) -> absl::Status {
        absl::StatusOr<kv::CompressionType> parsed = kv::ParseCompressionType(text);
        if (!parsed.ok()) return parsed.status();
        o->pull_compression = *parsed;
        o->pull_compression_given = true;
        return absl::OkStatus();
      },
      "follows --gc-type",
      "compression of the pulls (dist_sync, dist_device_sync): none, fp16, int8 (a byte per value and a "
      "scale) or 1bit; each step's weight change is packed once by the servers, which keep what packing "
      "lost and add it to a later step's, so every worker still holds the same weights. Not given: the "
      "pulls follow --gc-type (int8 after 2bit, 1bit or int8, fp16 after fp16), none in other modes");
  f.AddDouble("gc-threshold", &o->gc_threshold,
              "2bit: values reaching +-threshold are sent as +-threshold, in MXNet's units: gradients summed "
              "over the batch, so the quantum on dtrain's mean gradients is threshold / --batch-size "
              "(0.5 with batch 64: 0.0078125)");
}

}  // namespace

void AddTrainFlags(FlagSet& f, TrainOptions* o) {
  f.AddString("network", &o->network, "the network: mlp, lenet, resnet (CIFAR-style, --num-layers) or resnet18");
  f.AddString("hidden", &o->hidden,
              "the mlp's hidden layer widths, e.g. 2048,2048 (empty: MXNet's 128,64; as torch_reference.py --hidden)");
  f.AddInt("num-layers", &o->num_layers, "the resnet's depth, 6n+2: 20, 56, 110 (0: 20)");
  f.AddString("augment", &o->augment,
              "random crop (4-pixel padding) and horizontal flip of training images, as MXNet's train_cifar10.py: "
              "auto (on for CIFAR-format data), on or off");
  f.AddInt("num-epochs", &o->num_epochs, "epochs to train (counting the resumed ones)");
  f.AddInt("batch-size", &o->batch_size, "samples per batch, per worker");
  f.AddDouble("lr", &o->lr, "initial learning rate");
  f.AddDouble("lr-factor", &o->lr_factor, "multiply the learning rate by this at each --lr-step-epochs");
  AddParsedValue(f, "lr-step-epochs", &o->lr_step_epoch_list, ParseEpochList, absl::StrJoin(o->lr_step_epoch_list, ","),
                 "epochs at which the learning rate drops, e.g. 10,20");
  f.AddDouble("mom", &o->mom, "momentum (sgd)");
  f.AddDouble("wd", &o->wd, "weight decay");
  f.AddString("optimizer", &o->optimizer, "sgd or adam");
  f.AddBool("overlap", &o->overlap,
            "dist_*: push each parameter's gradient as soon as backward computes it, and start the next "
            "forward before the new weights are all in, waiting for each layer's as it reaches it, so that "
            "communication overlaps the rest of backward and the next forward (the same weights, bit for bit); "
            "on by default, --no-overlap for forward, backward, push-pull one after another",
            {"DTRAIN_OVERLAP"});
  f.AddBool("weigh-stale", &o->weigh_stale,
            "dist_ssp: a gradient computed on weights L steps old (this worker ran ahead of the others) counts "
            "1/(1+L) in its step, so that the default momentum trains as in dist_sync (docs/tuning.md); on by "
            "default, --no-weigh-stale to count every push in full",
            {"DTRAIN_WEIGH_STALE"});
  f.AddInt("bigarray-bound", &o->bigarray_bound,
           "dist_*: parameters with more elements are cut into keys of this many and spread over the servers "
           "(MXNet's MXNET_KVSTORE_BIGARRAY_BOUND; 1024..1048576; every worker must use the same, and a resume "
           "the one its checkpoint was written with). 0, the default: chosen, 131072 for a model with "
           "tensors above 1048576 elements, otherwise 1048576 unless that would put over 1.25x its share of "
           "the elements on one server, then a bound that cuts the largest tensor into 4 keys per server; a "
           "resume finds the one its checkpoint was cut with",
           {"MXNET_KVSTORE_BIGARRAY_BOUND"});
  f.AddInt("connections-per-server", &o->connections_per_server,
           "dist_*: TCP connections to each server, over which this worker's keys are spread so that TLS "
           "encryption runs on several cores at each end (1..16; the same weights whatever the number). 0, the "
           "default: chosen by the transport, 1 in plaintext, 2 with TLS (docs/security.md, \"What it costs\")",
           {"DTRAIN_CONNECTIONS_PER_SERVER"});
  f.AddString("model-prefix", &o->model_prefix, "checkpoint prefix, e.g. model/mnist (empty: no checkpoints)");
  f.AddInt("load-epoch", &o->load_epoch, "resume from PREFIX-NNNN.params/.states of this epoch");
  f.AddBool("overwrite-checkpoints", &o->overwrite_checkpoints,
            "delete the --model-prefix checkpoints of an earlier run (or those after --load-epoch) "
            "instead of refusing to mix them with this run's");
  f.AddBool("save-safetensors", &o->save_safetensors,
            "also write PREFIX-NNNN.safetensors beside each epoch's .params (loadable by Python's safetensors, "
            "numpy; `dtrain export` does the same for an existing checkpoint)");
  f.AddInt("disp-batches", &o->disp_batches, "print speed and accuracy every N batches");
  f.AddInt("num-examples", &o->num_examples, "training examples to use (the first N of the set)");
  f.AddInt("num-test-examples", &o->num_test_examples,
           "test examples the validation accuracy is measured on (the first N; 0: all)");
  f.AddString("data-dir", &o->data_dir, "directory of the IDX files (raw or .gz)", {"DTRAIN_DATA_DIR"});
  f.AddInt("threads", &o->threads, "LibTorch threads (0: cores shared among this host's workers)", {"DTRAIN_THREADS"});
  f.AddInt("local-workers", &o->local_workers,
           "workers on this host, among which --threads 0 shares the cores (dtrain launch sets it)",
           {"DTRAIN_LOCAL_WORKERS"});
  f.AddInt("seed", &o->seed, "random seed for initialisation and shuffling");
  AddParsedValue(f, "gpus", &o->gpu_list, ParseGpuList, absl::StrJoin(o->gpu_list, ","),
                 "GPUs to train on, one model replica each, e.g. 0,1 (MXNet's --gpus; empty: the CPU; needs a "
                 "LibTorch with CUDA, docs/gpu.md)",
                 {"DTRAIN_GPUS"});
  f.AddInt("cpu-replicas", &o->cpu_replicas,
           "for tests: train N model replicas on the CPU, each on its slice of the batch, through the --gpus "
           "path (local aggregation, the host model's gradients pushed); 0: the one model, as usual");
  AddCompressionFlags(f, o);
}

namespace {

// "--FLAG: WHY", the form of every error FinishTrainFlags reports.
absl::Status BadFlag(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

// The job's mode, staleness and step deadline; the flags that depend on the mode alone.
absl::Status ResolveKVStore(TrainOptions* o, const JobSpec& job) {
  o->mode = job.mode;
  o->staleness = job.staleness;
  o->sync_timeout_s = job.sync_timeout_s;
  if (o->bigarray_bound != 0 && (o->bigarray_bound < 1024 || o->bigarray_bound > kv::kMaxChunkElems)) {
    return BadFlag("bigarray-bound", absl::StrCat(o->bigarray_bound, " is not in 1024..", kv::kMaxChunkElems,
                                                  " elements (or 0: chosen from the model and the servers)"));
  }
  if (o->connections_per_server < 0 || o->connections_per_server > kMaxConnectionsPerServer) {
    return BadFlag("connections-per-server",
                   absl::StrCat(o->connections_per_server, " is not in 1..", kMaxConnectionsPerServer,
                                " (or 0: chosen by the transport)"));
  }
  return absl::OkStatus();
}

// --network, --hidden and --num-layers into o->network_spec; checks --augment.
absl::Status ResolveNetwork(TrainOptions* o) {
  std::vector<int64_t> hidden;
  if (!o->hidden.empty()) {
    absl::StatusOr<std::vector<int64_t>> parsed = models::ParseHiddenList(o->hidden);
    if (!parsed.ok()) return BadFlag("hidden", std::string(parsed.status().message()));
    hidden = *std::move(parsed);
  }
  const std::vector<std::string> known = models::KnownNetworks();
  if (std::find(known.begin(), known.end(), o->network) == known.end()) {
    return BadFlag("network", absl::StrCat("\"", o->network, "\" is not one of ", absl::StrJoin(known, ", ")));
  }
  if (o->num_layers < 0 || o->num_layers > models::kMaxResNetLayers) {
    return BadFlag("num-layers", absl::StrCat("must be in 0..", models::kMaxResNetLayers));
  }
  absl::StatusOr<models::NetworkSpec> spec =
      models::ResolveNetworkSpec(o->network, hidden, 28 * 28, 10, static_cast<int>(o->num_layers));
  if (!spec.ok()) return BadFlag(o->hidden.empty() ? "num-layers" : "hidden", std::string(spec.status().message()));
  if (o->augment != "auto" && o->augment != "on" && o->augment != "off") {
    return BadFlag("augment", absl::StrCat("\"", o->augment, "\" is not auto, on or off"));
  }
  o->network_spec = *std::move(spec);
  return absl::OkStatus();
}

// The training schedule: epochs, batch, optimizer, resumption, timeouts.
absl::Status CheckSchedule(const TrainOptions& o) {
  if (o.num_epochs < 1) return BadFlag("num-epochs", "must be >= 1");
  if (o.batch_size < 1) return BadFlag("batch-size", "must be >= 1");
  if (o.lr <= 0) return BadFlag("lr", "must be > 0");
  if (o.lr_factor <= 0 || o.lr_factor > 1) return BadFlag("lr-factor", "must be in (0, 1]");
  if (o.mom < 0 || o.mom >= 1) return BadFlag("mom", "must be in [0, 1)");
  if (o.wd < 0) return BadFlag("wd", "must be >= 0");
  if (o.optimizer != "sgd" && o.optimizer != "adam") return BadFlag("optimizer", "sgd or adam");
  if (o.load_epoch < 0) return BadFlag("load-epoch", "must be >= 0");
  if (o.load_epoch > 0 && o.model_prefix.empty()) return BadFlag("load-epoch", "needs --model-prefix");
  if (o.load_epoch >= o.num_epochs) {
    return BadFlag("load-epoch", absl::StrCat("epoch ", o.load_epoch, " is not before --num-epochs ", o.num_epochs));
  }
  if (o.disp_batches < 1) return BadFlag("disp-batches", "must be >= 1");
  if (o.num_examples < 1) return BadFlag("num-examples", "must be >= 1");
  if (o.num_test_examples < 0) return BadFlag("num-test-examples", "must be >= 0");
  if (o.threads < 0) return BadFlag("threads", "must be >= 0");
  return absl::OkStatus();
}

// The pull codec a --gc-type implies where --pull-gc-type is not given: a push that is
// compressed leaves the float32 pull setting the pace on a full-duplex link (the wide mlp
// at 300 Mbit/s: 2bit pushes alone ran at 1.01x DDP), so the pull is packed too. 2bit
// itself cannot pack pulls (its fixed quantum suits gradients, not weight changes) and
// 1bit pulls cost accuracy that int8 ones do not (docs/tuning.md), so both get int8; fp16
// and int8 keep their own, near lossless, codec.
kv::CompressionType DefaultPullCompression(kv::CompressionType push) {
  switch (push) {
    case kv::CompressionType::kNone: return kv::CompressionType::kNone;
    case kv::CompressionType::kFp16: return kv::CompressionType::kFp16;
    default: return kv::CompressionType::kInt8;
  }
}

// Only the steps of dist_sync and dist_device_sync give the servers a weight change to pack.
bool PullCompressible(KVStoreMode mode) {
  return mode == KVStoreMode::kDistSync || mode == KVStoreMode::kDistDeviceSync;
}

// --gc-threshold into o->compression; checks --gc-type and --pull-gc-type against the
// mode and, when --pull-gc-type is not given, derives it from --gc-type (none where the
// mode cannot pack pulls: a default never turns a valid command into an error).
absl::Status ResolveCompression(TrainOptions* o) {
  const kv::CompressionType gc = o->compression.type;
  o->compression.threshold = static_cast<float>(o->gc_threshold);
  if (gc == kv::CompressionType::kTwoBit && !(o->gc_threshold > 0 && o->gc_threshold < 1e30)) {
    return BadFlag("gc-threshold", "must be > 0 (and finite)");
  }
  if (gc != kv::CompressionType::kNone && !IsDistributed(o->mode)) {
    return BadFlag("gc-type", absl::StrCat("compresses the pushes to the servers: it needs a dist_* --kv-store, not ",
                                           KVStoreModeName(o->mode)));
  }
  if (!o->pull_compression_given) {
    o->pull_compression = PullCompressible(o->mode) ? DefaultPullCompression(gc) : kv::CompressionType::kNone;
    return absl::OkStatus();
  }
  const kv::CompressionType pull_gc = o->pull_compression;
  if (pull_gc == kv::CompressionType::kTwoBit) {
    return BadFlag("pull-gc-type", "2bit's fixed quantum does not fit weight changes: use fp16, int8 or 1bit");
  }
  if (pull_gc != kv::CompressionType::kNone && !PullCompressible(o->mode)) {
    return BadFlag("pull-gc-type", absl::StrCat("sends each step's weight change, which needs the steps of "
                                                "dist_sync or dist_device_sync, not --kv-store ",
                                                KVStoreModeName(o->mode)));
  }
  return absl::OkStatus();
}

// Checks --cpu-replicas against --gpus.
absl::Status CheckDevices(const TrainOptions& o) {
  if (o.cpu_replicas < 0 || o.cpu_replicas > kMaxGpusPerWorker) {
    return BadFlag("cpu-replicas", absl::StrCat("must be in 0..", kMaxGpusPerWorker));
  }
  if (o.cpu_replicas > 0 && !o.gpu_list.empty()) return BadFlag("cpu-replicas", "cannot be combined with --gpus");
  return absl::OkStatus();
}

}  // namespace

absl::Status FinishTrainFlags(TrainOptions* o, const JobSpec& job) {
  // In this order: the first error the command line has is the one reported.
  DTRAIN_RETURN_IF_ERROR(ResolveKVStore(o, job));
  DTRAIN_RETURN_IF_ERROR(ResolveNetwork(o));
  DTRAIN_RETURN_IF_ERROR(CheckSchedule(*o));
  DTRAIN_RETURN_IF_ERROR(ResolveCompression(o));
  DTRAIN_RETURN_IF_ERROR(CheckDevices(*o));
  return absl::OkStatus();
}

}  // namespace dtrain::worker
