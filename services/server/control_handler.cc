#include "services/server/control_handler.h"

#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kv/finite_check.h"
#include "common/kv/tensor_codec.h"
#include "common/kvstore_mode_wire.h"
#include "common/log.h"
#include "services/server/replica_catch_up.h"
#include "services/server/server_membership.h"

namespace dtrain::server {
namespace {

// Strings and lists in a Configure are short in any real job; longer ones are refused
// before they are echoed into an error (a status message travels in a gRPC header)
// or kept.
constexpr size_t kMaxNameBytes = 64;
constexpr int kMaxLrSteps = 10000;

absl::Status CheckConfigureSizes(const v1::ConfigureRequest& req) {
  if (req.kv_store().size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kv_store has ", req.kv_store().size(),
                                                   " bytes (want dist_sync, dist_device_sync or dist_async)"));
  }
  if (req.optimizer().name().size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.name has ", req.optimizer().name().size(), " bytes (want \"sgd\" or \"adam\")"));
  }
  if (req.optimizer().lr_steps_size() > kMaxLrSteps) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer.lr_steps has ", req.optimizer().lr_steps_size(),
                                                   " entries, over the cap of ", kMaxLrSteps));
  }
  return absl::OkStatus();
}

// The store setup a Configure asks for, once its mode was read.
absl::StatusOr<kv::StoreConfig> StoreConfigOf(const v1::ConfigureRequest& req, kv::MergeMode mode) {
  kv::StoreConfig config;
  config.mode = mode;
  config.num_workers = req.num_workers();
  config.staleness = req.staleness();
  config.optimizer = OptimizerFromProto(req.optimizer());
  // A worker that replaces a dead one may have to redo a step that already merged on
  // some keys: it pulls their previous version (PushPullRequest.exact_version).
  config.keep_previous_version = config.mode == kv::MergeMode::kSync;
  if (!v1::Compression_IsValid(req.pull_compression())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown pull_compression ", req.pull_compression(),
                                                   " (want COMPRESSION_NONE, _FP16, _INT8 or _1BIT)"));
  }
  config.pull_compression = static_cast<kv::CompressionType>(req.pull_compression());
  if (req.epoch_lr().epochs_size() > kv::kMaxEpochLrSteps) {
    return absl::InvalidArgumentError(absl::StrCat("epoch_lr.epochs has ", req.epoch_lr().epochs_size(),
                                                   " entries, over the cap of ", kv::kMaxEpochLrSteps));
  }
  config.epoch_lr.num_examples = req.epoch_lr().num_examples();
  config.epoch_lr.batch_size = req.epoch_lr().batch_size();
  config.epoch_lr.epochs.assign(req.epoch_lr().epochs().begin(), req.epoch_lr().epochs().end());
  return config;
}

void LogConfigured(const v1::ConfigureRequest& req, const kv::StoreConfig& config) {
  DTRAIN_LOG(INFO) << "configured: " << KVStoreModeName(*KVStoreModeOf(req.mode(), req.kv_store()))
                   << (config.mode == kv::MergeMode::kSsp ? absl::StrCat(" (staleness ", config.staleness, ")") : "")
                   << ", " << config.num_workers << " workers, optimizer " << config.optimizer.name << " lr "
                   << config.optimizer.learning_rate
                   << (config.pull_compression != kv::CompressionType::kNone
                           ? absl::StrCat(", pull compression ", kv::CompressionTypeName(config.pull_compression))
                           : std::string());
}

// kv::BytesToFloats, its error naming the key and the field.
absl::Status FloatsFromBytes(const std::string& bytes, const char* what, uint64_t key, std::vector<float>* out) {
  absl::Status s = kv::BytesToFloats(bytes, out);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("key ", key, ": ", what, " has ", s.message()));
  return s;
}

// Initial weights or optimizer state holding NaN or Inf would poison the key from its
// first step: refused like a non-finite push.
absl::Status CheckFiniteInit(const std::vector<float>& v, const char* what, uint64_t key) {
  if (kv::AllFinite(v.data(), static_cast<int64_t>(v.size()))) return absl::OkStatus();
  const int64_t at = kv::FirstNonFinite(v.data(), static_cast<int64_t>(v.size()));
  return absl::InvalidArgumentError(absl::StrCat("key ", key, ": ", what, " element ", at, " is ",
                                                 v[static_cast<size_t>(at)],
                                                 " (dtrain-server --allow-non-finite accepts it)"));
}

}  // namespace

absl::StatusOr<kv::MergeMode> ParseKvStore(const std::string& kv_store) {
  absl::StatusOr<KVStoreMode> mode = ParseKVStoreMode(kv_store);
  if (mode.ok() && IsDistributed(*mode)) {
    if (IsAsync(*mode)) return kv::MergeMode::kAsync;
    return *mode == KVStoreMode::kDistSsp ? kv::MergeMode::kSsp : kv::MergeMode::kSync;
  }
  return absl::InvalidArgumentError(absl::StrCat("kv_store \"", kv_store,
                                                 "\" is not served by a parameter server (want dist_sync, "
                                                 "dist_device_sync, dist_async or dist_ssp)"));
}

absl::StatusOr<kv::MergeMode> MergeModeOf(const v1::ConfigureRequest& req) {
  if (req.mode() == v1::KV_STORE_MODE_UNSPECIFIED) return ParseKvStore(req.kv_store());
  absl::StatusOr<KVStoreMode> mode = KVStoreModeOf(req.mode(), req.kv_store());
  if (!mode.ok()) return mode.status();
  return ParseKvStore(KVStoreModeName(*mode));
}

kv::OptimizerOptions OptimizerFromProto(const v1::OptimizerConfig& p) {
  kv::OptimizerOptions o;
  o.name = p.name().empty() ? "sgd" : p.name();
  o.learning_rate = p.learning_rate();
  o.momentum = p.momentum();
  o.weight_decay = p.weight_decay();
  o.lr_factor = p.lr_factor() == 0 ? 1.0 : p.lr_factor();
  o.lr_steps.assign(p.lr_steps().begin(), p.lr_steps().end());
  o.beta1 = p.beta1();
  o.beta2 = p.beta2();
  o.epsilon = p.epsilon();
  o.rescale_grad = p.rescale_grad() == 0 ? 1.0 : p.rescale_grad();
  o.clip_gradient = p.clip_gradient();
  return o;
}

absl::Status ControlHandler::Configure(const v1::ConfigureRequest& req) const {
  if (absl::Status s = CheckConfigureSizes(req); !s.ok()) return s;
  absl::StatusOr<kv::MergeMode> mode = MergeModeOf(req);
  if (!mode.ok()) return mode.status();
  absl::StatusOr<kv::StoreConfig> config = StoreConfigOf(req, *mode);
  if (!config.ok()) return config.status();
  if (options_.membership != nullptr) {
    absl::StatusOr<int> workers = options_.membership->ConfigureWorkers(config->num_workers, options_.membership_wait);
    if (!workers.ok()) return workers.status();
    config->num_workers = *workers;
  }
  if (req.has_epoch_lr() && req.epoch_lr().epochs_size() > 0 && options_.membership == nullptr) {
    return absl::InvalidArgumentError("epoch_lr is for an elastic job's servers; this one is not elastic");
  }
  if (absl::Status s = store_->Configure(*config); !s.ok()) return s;
  LogConfigured(req, *config);
  // A restarted chain member is configured the same way before it gets a key.
  if (options_.catch_up != nullptr) options_.catch_up->NoteConfigure(req);
  return absl::OkStatus();
}

absl::Status ControlHandler::InitKeys(const v1::InitKeysRequest& req) const {
  std::vector<float> values;
  std::vector<float> state;
  for (const v1::KeyInit& k : req.keys()) {
    if (k.dtype() != v1::DTYPE_FLOAT32) {
      return absl::InvalidArgumentError(
          absl::StrCat("key ", k.key(), ": dtype must be DTYPE_FLOAT32, got ", v1::DType_Name(k.dtype())));
    }
    absl::Status s = FloatsFromBytes(k.values(), "values", k.key(), &values);
    if (s.ok()) s = FloatsFromBytes(k.optimizer_state(), "optimizer_state", k.key(), &state);
    if (s.ok() && !options_.allow_non_finite) s = CheckFiniteInit(values, "values", k.key());
    if (s.ok() && !options_.allow_non_finite) s = CheckFiniteInit(state, "optimizer_state", k.key());
    if (s.ok() && k.chain_size() > kMaxChainLength) {
      s = absl::InvalidArgumentError(
          absl::StrCat("key ", k.key(), ": a chain of ", k.chain_size(), " servers, at most ", kMaxChainLength));
    }
    if (s.ok()) {
      const std::vector<int64_t> shape(k.shape().begin(), k.shape().end());
      s = store_->InitKey(k.key(), shape, values.data(), static_cast<int64_t>(values.size()), k.version(), state);
    }
    if (!s.ok()) return s;
    if (options_.catch_up != nullptr) {
      options_.catch_up->NoteChain(k.key(), std::vector<int>(k.chain().begin(), k.chain().end()));
    }
  }
  return absl::OkStatus();
}

// One answer: a KeyVersion is a few bytes, so even --max-keys keys fit well under the
// message limit. Asking for more keys than are held is refused before any work, as in
// GetState.
absl::Status ControlHandler::GetVersions(const v1::GetVersionsRequest& req, v1::GetVersionsResponse* resp) const {
  const int64_t held = store_->num_keys();
  if (req.keys_size() > held) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetVersions asks for ", req.keys_size(), " keys but this server holds ", held));
  }
  if (req.worker_rank() >= 0) {
    if (absl::Status s = store_->AdmitWorker(req.worker_rank(), req.job_id(), req.incarnation()); !s.ok()) return s;
  }
  std::vector<kv::KeyVersion> versions;
  if (absl::Status s = store_->Versions({req.keys().begin(), req.keys().end()}, req.worker_rank(), &versions);
      !s.ok()) {
    return s;
  }
  resp->mutable_keys()->Reserve(static_cast<int>(versions.size()));
  for (const kv::KeyVersion& v : versions) {
    v1::KeyVersion* out = resp->add_keys();
    out->set_key(v.key);
    out->set_version(v.version);
    out->set_last_push_step(v.last_push_step);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> ControlHandler::StateKeys(const v1::GetStateRequest& req) const {
  std::vector<uint64_t> held = store_->Keys();
  if (req.keys().empty()) return held;
  if (static_cast<size_t>(req.keys_size()) > held.size()) {
    // Asking for more keys than are held means duplicates.
    return absl::InvalidArgumentError(
        absl::StrCat("GetState asks for ", req.keys_size(), " keys but this server holds ", held.size()));
  }
  const std::unordered_set<uint64_t> have(held.begin(), held.end());
  std::vector<uint64_t> keys;
  keys.reserve(static_cast<size_t>(req.keys_size()));
  for (uint64_t k : req.keys()) {
    if (have.count(k) == 0) return absl::NotFoundError(absl::StrCat("key ", k, " is not held by this server"));
    keys.push_back(k);
  }
  return keys;
}

absl::Status ControlHandler::KeyStateOf(uint64_t key, v1::KeyState* out) const {
  std::vector<kv::KeyState> snap;
  if (absl::Status s = store_->Snapshot({key}, &snap); !s.ok()) return s;
  const kv::KeyState& k = snap[0];
  out->Clear();
  out->set_key(k.key);
  for (int64_t d : k.shape) out->add_shape(d);
  out->set_dtype(v1::DTYPE_FLOAT32);
  out->set_version(k.version);
  out->set_values(kv::FloatsToBytes(k.values.data(), static_cast<int64_t>(k.values.size())));
  out->set_optimizer_state(kv::FloatsToBytes(k.optimizer_state.data(), static_cast<int64_t>(k.optimizer_state.size())));
  return absl::OkStatus();
}

}  // namespace dtrain::server
