// PsClient's unary calls: configure a server, give it keys, read their state and
// versions. The PushPull stream is in ps_client.cc.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/kv/tensor_codec.h"
#include "common/kvstore_mode_wire.h"
#include "services/worker/kv/ps_client.h"
#include "services/worker/kv/ps_client_impl.h"

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

absl::Status PsClient::Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                 absl::Duration timeout, int staleness, kv::CompressionType pull_compression) {
  v1::ConfigureRequest req;
  req.set_mode(dtrain::ToProto(mode));
  req.set_num_workers(num_workers);
  req.set_staleness(staleness);
  req.set_pull_compression(static_cast<v1::Compression>(pull_compression));
  ToProto(optimizer, req.mutable_optimizer());
  v1::ConfigureResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  return impl_->Annotate(FromGrpc(impl_->stub->Configure(&ctx, req, &resp)), "Configure");
}

absl::Status PsClient::InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                                const std::vector<std::vector<int>>& chains) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t i = 0;
  while (i < keys.size()) {
    v1::InitKeysRequest req;
    size_t bytes = 0;
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
    v1::InitKeysResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    absl::Status s = FromGrpc(impl_->stub->InitKeys(&ctx, req, &resp));
    if (!s.ok()) return impl_->Annotate(s, "InitKeys");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<kv::KeyState>> PsClient::GetState(const std::vector<uint64_t>& keys,
                                                             absl::Duration timeout) {
  v1::GetStateRequest req;
  for (uint64_t k : keys) req.add_keys(k);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  std::unique_ptr<grpc::ClientReader<v1::KeyState>> reader = impl_->stub->GetState(&ctx, req);
  std::vector<kv::KeyState> out;
  v1::KeyState ks;
  absl::Status bad;
  while (reader->Read(&ks)) {
    if (!bad.ok()) continue;  // drain, then report
    kv::KeyState snap;
    snap.key = ks.key();
    snap.shape.assign(ks.shape().begin(), ks.shape().end());
    snap.version = ks.version();
    bad = kv::BytesToFloats(ks.values(), &snap.values);
    if (bad.ok()) bad = kv::BytesToFloats(ks.optimizer_state(), &snap.optimizer_state);
    // Our own server sent it: a broken answer is INTERNAL, not the caller's argument.
    if (!bad.ok()) bad = absl::InternalError(absl::StrCat("key ", ks.key(), ": ", bad.message()));
    out.push_back(std::move(snap));
  }
  absl::Status s = FromGrpc(reader->Finish());
  if (s.ok()) s = bad;
  if (!s.ok()) return impl_->Annotate(s, "GetState");
  return out;
}

void PsClient::SetIdentity(const std::string& job_id, uint64_t incarnation) {
  impl_->job_id = job_id;
  impl_->incarnation = incarnation;
}

absl::StatusOr<std::vector<kv::KeyVersion>> PsClient::GetVersions(const std::vector<uint64_t>& keys,
                                                                  absl::Duration timeout) {
  v1::GetVersionsRequest req;
  for (uint64_t k : keys) req.add_keys(k);
  req.set_worker_rank(impl_->worker_rank);
  req.set_job_id(impl_->job_id);
  req.set_incarnation(impl_->incarnation);
  v1::GetVersionsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  absl::Status s = FromGrpc(impl_->stub->GetVersions(&ctx, req, &resp));
  if (!s.ok()) return impl_->Annotate(s, "GetVersions");
  if (!keys.empty() && resp.keys_size() != static_cast<int>(keys.size())) {
    return impl_->Annotate(
        absl::InternalError(absl::StrCat("answered ", resp.keys_size(), " keys, asked for ", keys.size())),
        "GetVersions");
  }
  std::vector<kv::KeyVersion> out;
  out.reserve(static_cast<size_t>(resp.keys_size()));
  for (const v1::KeyVersion& v : resp.keys()) out.push_back({v.key(), v.version(), v.last_push_step()});
  return out;
}

}  // namespace dtrain::worker
