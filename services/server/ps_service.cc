#include "services/server/ps_service.h"

#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_util.h"
#include "common/kvstore_mode_wire.h"
#include "common/kv/tensor_codec.h"
#include "common/log.h"
#include "common/kv/finite_check.h"
#include "services/server/push_pull_reactor.h"

namespace dtrain::server {
namespace {

// kv::BytesToFloats, its error naming the key and the field.
absl::Status FloatsFromBytes(const std::string& bytes, const char* what, uint64_t key, std::vector<float>* out) {
  absl::Status s = kv::BytesToFloats(bytes, out);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("key ", key, ": ", what, " has ", s.message()));
  return s;
}

// Streams one KeyState per key, snapshotting each key just before it is written so
// the shard is never copied whole.
class GetStateReactor final : public grpc::ServerWriteReactor<v1::KeyState> {
 public:
  // `allowed`: NodeChecks::ForState's answer; a refusal is the stream's only answer.
  GetStateReactor(kv::ShardStore* store, const v1::GetStateRequest& req, const absl::Status& allowed) : store_(store) {
    if (!allowed.ok()) {
      Finish(ToGrpc(allowed));
      return;
    }
    const std::vector<uint64_t> held = store_->Keys();
    if (req.keys().empty()) {
      keys_ = held;
    } else if (static_cast<size_t>(req.keys_size()) > held.size()) {
      // Asking for more keys than are held means duplicates: refused before any is copied.
      Finish(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("GetState asks for ", req.keys_size(), " keys but this server holds ", held.size())));
      return;
    } else {
      const std::unordered_set<uint64_t> have(held.begin(), held.end());
      for (uint64_t k : req.keys()) {
        if (have.count(k) == 0) {
          Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("key ", k, " is not held by this server")));
          return;
        }
        keys_.push_back(k);
      }
    }
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "GetState stream broke"));
      return;
    }
    Next();
  }

  void OnDone() override { delete this; }

 private:
  void Next() {
    if (next_ == keys_.size()) {
      Finish(grpc::Status::OK);
      return;
    }
    std::vector<kv::KeyState> snap;
    absl::Status s = store_->Snapshot({keys_[next_++]}, &snap);
    if (!s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    const kv::KeyState& k = snap[0];
    msg_.Clear();
    msg_.set_key(k.key);
    for (int64_t d : k.shape) msg_.add_shape(d);
    msg_.set_dtype(v1::DTYPE_FLOAT32);
    msg_.set_version(k.version);
    msg_.set_values(kv::FloatsToBytes(k.values.data(), static_cast<int64_t>(k.values.size())));
    msg_.set_optimizer_state(
        kv::FloatsToBytes(k.optimizer_state.data(), static_cast<int64_t>(k.optimizer_state.size())));
    StartWrite(&msg_);
  }

  kv::ShardStore* store_;
  std::vector<uint64_t> keys_;
  size_t next_ = 0;
  v1::KeyState msg_;
};

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

PsService::PsService(kv::ShardStore* store, PsServiceOptions options)
    : store_(store),
      options_(options),
      checks_(options.node_tokens, options.token_key_wait, store),
      timer_([this] { TimerLoop(); }) {}

PsService::~PsService() {
  {
    absl::MutexLock lock(&timer_mu_);
    stopping_ = true;
  }
  timer_.join();
}

void PsService::TimerLoop() {
  absl::MutexLock lock(&timer_mu_);
  while (!timer_mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.check_interval)) {
    timer_mu_.Unlock();
    store_->CheckDeadlines(absl::Now(), options_.still_waiting_every);
    timer_mu_.Lock();
  }
}

grpc::ServerUnaryReactor* PsService::Configure(grpc::CallbackServerContext* ctx, const v1::ConfigureRequest* req,
                                               v1::ConfigureResponse* /*resp*/) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status s = checks_.ForSetup(*ctx, "Configure");
  if (s.ok()) s = CheckConfigureSizes(*req);
  absl::StatusOr<kv::MergeMode> mode = s.ok() ? MergeModeOf(*req) : s;
  s = mode.status();
  if (s.ok()) {
    kv::StoreConfig config;
    config.mode = *mode;
    config.num_workers = req->num_workers();
    config.staleness = req->staleness();
    config.optimizer = OptimizerFromProto(req->optimizer());
    // A worker that replaces a dead one may have to redo a step that already merged on
    // some keys: it pulls their previous version (PushPullRequest.exact_version).
    config.keep_previous_version = config.mode == kv::MergeMode::kSync;
    if (!v1::Compression_IsValid(req->pull_compression())) {
      s = absl::InvalidArgumentError(absl::StrCat("unknown pull_compression ", req->pull_compression(),
                                                  " (want COMPRESSION_NONE, _FP16, _INT8 or _1BIT)"));
    }
    config.pull_compression = static_cast<kv::CompressionType>(req->pull_compression());
    if (s.ok()) s = store_->Configure(config);
    if (s.ok()) {
      DTRAIN_LOG(INFO) << "configured: " << KVStoreModeName(*KVStoreModeOf(req->mode(), req->kv_store()))
                       << (config.mode == kv::MergeMode::kSsp ? absl::StrCat(" (staleness ", config.staleness, ")")
                                                              : "")
                       << ", " << config.num_workers << " workers, optimizer " << config.optimizer.name << " lr "
                       << config.optimizer.learning_rate
                       << (config.pull_compression != kv::CompressionType::kNone
                               ? absl::StrCat(", pull compression ", kv::CompressionTypeName(config.pull_compression))
                               : std::string());
      // A restarted chain member is configured the same way before it gets a key.
      if (options_.catch_up != nullptr) options_.catch_up->NoteConfigure(*req);
    }
  }
  if (!s.ok()) DTRAIN_LOG(WARNING) << "Configure refused: " << s.message();
  reactor->Finish(ToGrpc(s));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::InitKeys(grpc::CallbackServerContext* ctx, const v1::InitKeysRequest* req,
                                              v1::InitKeysResponse* /*resp*/) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status s = checks_.ForSetup(*ctx, "InitKeys");
  std::vector<float> values;
  std::vector<float> state;
  for (const v1::KeyInit& k : req->keys()) {
    if (!s.ok()) break;
    if (k.dtype() != v1::DTYPE_FLOAT32) {
      s = absl::InvalidArgumentError(
          absl::StrCat("key ", k.key(), ": dtype must be DTYPE_FLOAT32, got ", v1::DType_Name(k.dtype())));
      break;
    }
    s = FloatsFromBytes(k.values(), "values", k.key(), &values);
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
    if (s.ok() && options_.catch_up != nullptr) {
      options_.catch_up->NoteChain(k.key(), std::vector<int>(k.chain().begin(), k.chain().end()));
    }
    if (!s.ok()) break;
  }
  reactor->Finish(ToGrpc(s));
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PsService::PushPull(grpc::CallbackServerContext* ctx) {
  StreamOptions stream;
  // With TLS the stream speaks for the worker whose token opened it, and no other.
  absl::StatusOr<std::optional<auth::TokenClaims>> worker = checks_.ForStream(*ctx);
  if (worker.ok()) {
    stream.bound_worker = *worker;
  } else {
    stream.refused = worker.status();
  }
  stream.sync_timeout = options_.sync_timeout;
  stream.request_limits = options_.request_limits;
  stream.allow_non_finite = options_.allow_non_finite;
  stream.max_pending_requests = options_.max_pending_requests;
  stream.max_queued_bytes = options_.max_queued_bytes;
  stream.metrics = options_.metrics;
  stream.catch_up = options_.catch_up;
  return new PushPullReactor(store_, stream);
}

grpc::ServerWriteReactor<v1::KeyState>* PsService::GetState(grpc::CallbackServerContext* ctx,
                                                            const v1::GetStateRequest* req) {
  return new GetStateReactor(store_, *req, checks_.ForState(*ctx));
}

}  // namespace dtrain::server

namespace dtrain::server {

// Unary, one answer: a KeyVersion is a few bytes, so even --max-keys keys fit well
// under the message limit. Asking for more keys than are held is refused before any
// work, as in GetState.
grpc::ServerUnaryReactor* PsService::GetVersions(grpc::CallbackServerContext* ctx, const v1::GetVersionsRequest* req,
                                                 v1::GetVersionsResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status s = checks_.ForVersions(*ctx, req->worker_rank(), req->incarnation());
  const int64_t held = store_->num_keys();
  if (s.ok() && req->keys_size() > held) {
    s = absl::InvalidArgumentError(
        absl::StrCat("GetVersions asks for ", req->keys_size(), " keys but this server holds ", held));
  }
  // A rejoining worker asks this before its first push: its incarnation takes the
  // rank here already, so the process it replaces is cut off as early as possible.
  if (s.ok() && req->worker_rank() >= 0) s = store_->AdmitWorker(req->worker_rank(), req->job_id(), req->incarnation());
  std::vector<kv::KeyVersion> versions;
  if (s.ok()) s = store_->Versions({req->keys().begin(), req->keys().end()}, req->worker_rank(), &versions);
  if (s.ok()) {
    resp->mutable_keys()->Reserve(static_cast<int>(versions.size()));
    for (const kv::KeyVersion& v : versions) {
      v1::KeyVersion* out = resp->add_keys();
      out->set_key(v.key);
      out->set_version(v.version);
      out->set_last_push_step(v.last_push_step);
    }
  }
  reactor->Finish(ToGrpc(s));
  return reactor;
}

}  // namespace dtrain::server
