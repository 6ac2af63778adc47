// PsClient's unary calls: configure a server, give it keys, read their state and
// versions. The PushPull stream is in ps_client.cc; the requests and the reading of
// their answers are control_request_proto.h's.
#include <string>
#include <utility>
#include <vector>

#include "common/grpc_util.h"
#include "services/worker/kv/control_request_proto.h"
#include "services/worker/kv/ps_client.h"
#include "services/worker/kv/ps_client_impl.h"

namespace dtrain::worker {

absl::Status PsClient::Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                 absl::Duration timeout, int staleness, kv::CompressionType pull_compression,
                                 const kv::EpochLrSteps& epoch_lr) {
  const v1::ConfigureRequest req =
      ConfigureRequestProto(mode, num_workers, optimizer, staleness, pull_compression, epoch_lr);
  v1::ConfigureResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  return impl_->Annotate(FromGrpc(impl_->stub->Configure(&ctx, req, &resp)), "Configure");
}

absl::Status PsClient::InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                                const std::vector<std::vector<int>>& chains) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t next = 0;
  while (next < keys.size()) {
    const v1::InitKeysRequest req = NextInitKeysRequest(keys, chains, &next);
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
  const v1::GetStateRequest req = GetStateRequestProto(keys);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  std::unique_ptr<grpc::ClientReader<v1::KeyState>> reader = impl_->stub->GetState(&ctx, req);
  std::vector<kv::KeyState> out;
  v1::KeyState ks;
  absl::Status bad;
  while (reader->Read(&ks)) {
    if (!bad.ok()) continue;  // drain, then report
    kv::KeyState snap;
    bad = KeyStateFromProto(ks, &snap);
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
  const v1::GetVersionsRequest req =
      GetVersionsRequestProto(keys, impl_->worker_rank, impl_->job_id, impl_->incarnation);
  v1::GetVersionsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout));
  absl::Status s = FromGrpc(impl_->stub->GetVersions(&ctx, req, &resp));
  if (!s.ok()) return impl_->Annotate(s, "GetVersions");
  absl::StatusOr<std::vector<kv::KeyVersion>> out = VersionsFromProto(resp, keys.size());
  if (!out.ok()) return impl_->Annotate(out.status(), "GetVersions");
  return out;
}

}  // namespace dtrain::worker
