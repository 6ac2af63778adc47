#include "services/worker/kv/control_request_proto.h"

#include "absl/strings/str_cat.h"
#include "common/kv/tensor_codec.h"
#include "common/kvstore_mode_wire.h"

namespace dtrain::worker {
namespace {

// InitKeys requests stay well under the 64 MB message limit (a lone key bigger than
// this still goes, alone).
constexpr size_t kInitBatchBytes = 8 << 20;

void ToProto(const kv::OptimizerOptions& o, v1::OptimizerConfig* p) {
  p->set_name(o.name);
  p->set_learning_rate(o.learning_rate);
  p->set_momentum(o.momentum);
  p->set_weight_decay(o.weight_decay);
  p->set_lr_factor(o.lr_factor);
  for (int64_t s : o.lr_steps) p->add_lr_steps(s);
  p->set_beta1(o.beta1);
  p->set_beta2(o.beta2);
  p->set_epsilon(o.epsilon);
  p->set_rescale_grad(o.rescale_grad);
  p->set_clip_gradient(o.clip_gradient);
}

}  // namespace

v1::ConfigureRequest ConfigureRequestProto(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                           int staleness, kv::CompressionType pull_compression,
                                           const kv::EpochLrSteps& epoch_lr) {
  v1::ConfigureRequest req;
  if (epoch_lr.enabled()) {
    req.mutable_epoch_lr()->set_num_examples(epoch_lr.num_examples);
    req.mutable_epoch_lr()->set_batch_size(epoch_lr.batch_size);
    for (int64_t e : epoch_lr.epochs) req.mutable_epoch_lr()->add_epochs(e);
  }
  req.set_mode(dtrain::ToProto(mode));
  req.set_num_workers(num_workers);
  req.set_staleness(staleness);
  req.set_pull_compression(static_cast<v1::Compression>(pull_compression));
  ToProto(optimizer, req.mutable_optimizer());
  return req;
}

v1::InitKeysRequest NextInitKeysRequest(const std::vector<kv::KeyState>& keys,
                                        const std::vector<std::vector<int>>& chains, size_t* next) {
  v1::InitKeysRequest req;
  size_t bytes = 0;
  size_t& i = *next;
  for (; i < keys.size(); ++i) {
    const kv::KeyState& k = keys[i];
    const size_t size = (k.values.size() + k.optimizer_state.size()) * sizeof(float) + 64;
    if (req.keys_size() > 0 && bytes + size > kInitBatchBytes) break;
    bytes += size;
    v1::KeyInit* ki = req.add_keys();
    ki->set_key(k.key);
    for (int64_t d : k.shape) ki->add_shape(d);
    ki->set_dtype(v1::DTYPE_FLOAT32);
    ki->set_values(kv::FloatsToBytes(k.values.data(), static_cast<int64_t>(k.values.size())));
    ki->set_version(k.version);
    ki->set_optimizer_state(
        kv::FloatsToBytes(k.optimizer_state.data(), static_cast<int64_t>(k.optimizer_state.size())));
    if (i < chains.size()) {
      for (int r : chains[i]) ki->add_chain(r);
    }
  }
  return req;
}

v1::GetStateRequest GetStateRequestProto(const std::vector<uint64_t>& keys) {
  v1::GetStateRequest req;
  for (uint64_t k : keys) req.add_keys(k);
  return req;
}

absl::Status KeyStateFromProto(const v1::KeyState& ks, kv::KeyState* out) {
  out->key = ks.key();
  out->shape.assign(ks.shape().begin(), ks.shape().end());
  out->version = ks.version();
  absl::Status bad = kv::BytesToFloats(ks.values(), &out->values);
  if (bad.ok()) bad = kv::BytesToFloats(ks.optimizer_state(), &out->optimizer_state);
  if (!bad.ok()) return absl::InternalError(absl::StrCat("key ", ks.key(), ": ", bad.message()));
  return absl::OkStatus();
}

v1::GetVersionsRequest GetVersionsRequestProto(const std::vector<uint64_t>& keys, int worker_rank,
                                               const std::string& job_id, uint64_t incarnation) {
  v1::GetVersionsRequest req;
  for (uint64_t k : keys) req.add_keys(k);
  req.set_worker_rank(worker_rank);
  req.set_job_id(job_id);
  req.set_incarnation(incarnation);
  return req;
}

absl::StatusOr<std::vector<kv::KeyVersion>> VersionsFromProto(const v1::GetVersionsResponse& resp, size_t asked) {
  if (asked > 0 && resp.keys_size() != static_cast<int>(asked)) {
    return absl::InternalError(absl::StrCat("answered ", resp.keys_size(), " keys, asked for ", asked));
  }
  std::vector<kv::KeyVersion> out;
  out.reserve(static_cast<size_t>(resp.keys_size()));
  for (const v1::KeyVersion& v : resp.keys()) out.push_back({v.key(), v.version(), v.last_push_step()});
  return out;
}

}  // namespace dtrain::worker
