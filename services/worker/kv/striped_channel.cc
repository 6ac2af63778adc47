#include "services/worker/kv/striped_channel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/worker/kv/ps_client.h"

namespace dtrain::worker {

StripedChannel::StripedChannel(std::vector<std::unique_ptr<ServerChannel>> connections)
    : connections_(std::move(connections)), elements_(connections_.size(), 0) {}

ServerChannel::Ticket StripedChannel::Outer(Ticket inner, int connection) const {
  return inner * connections_.size() + static_cast<Ticket>(connection);
}

ServerChannel& StripedChannel::ConnectionOfTicket(Ticket ticket, Ticket* inner) const {
  *inner = ticket / connections_.size();
  return *connections_[ticket % connections_.size()];
}

ServerChannel::Ticket StripedChannel::Submit(const KeyRequest& request) {
  auto it = connection_of_.find(request.key);
  if (it == connection_of_.end()) {
    const int least = static_cast<int>(std::min_element(elements_.begin(), elements_.end()) - elements_.begin());
    // A version-only request carries no elements; it still counts, so that many such
    // keys are not all given to one connection.
    elements_[least] += std::max<int64_t>({request.numel, request.payload.numel, 1});
    it = connection_of_.emplace(request.key, least).first;
  }
  return Outer(connections_[it->second]->Submit(request), it->second);
}

absl::Status StripedChannel::Wait(Ticket ticket, absl::Time deadline) {
  Ticket inner;
  ServerChannel& c = ConnectionOfTicket(ticket, &inner);
  if (inner == 0) return absl::InvalidArgumentError(absl::StrCat("ticket ", ticket, " unknown or already waited for"));
  return c.Wait(inner, deadline);
}

bool StripedChannel::WaitUntil(Ticket ticket, absl::Time until) {
  Ticket inner;
  ServerChannel& c = ConnectionOfTicket(ticket, &inner);
  return inner == 0 || c.WaitUntil(inner, until);
}

absl::Status StripedChannel::WaitAll(absl::Time deadline) {
  absl::Status first;
  for (auto& c : connections_) {
    absl::Status s = c->WaitAll(deadline);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

std::vector<ServerChannel::JoinNotice> StripedChannel::TakeJoinNotices() {
  std::vector<JoinNotice> all;
  for (auto& c : connections_) {
    std::vector<JoinNotice> some = c->TakeJoinNotices();
    all.insert(all.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
  }
  return all;
}

absl::Status StripedChannel::Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                       absl::Duration timeout, int staleness, kv::CompressionType pull_compression,
                                       const kv::EpochLrSteps& epoch_lr) {
  return connections_[0]->Configure(mode, num_workers, optimizer, timeout, staleness, pull_compression, epoch_lr);
}

absl::Status StripedChannel::InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                                      const std::vector<std::vector<int>>& chains) {
  return connections_[0]->InitKeys(keys, timeout, chains);
}

absl::StatusOr<std::vector<kv::KeyState>> StripedChannel::GetState(const std::vector<uint64_t>& keys,
                                                                   absl::Duration timeout) {
  return connections_[0]->GetState(keys, timeout);
}

absl::StatusOr<std::vector<kv::KeyVersion>> StripedChannel::GetVersions(const std::vector<uint64_t>& keys,
                                                                        absl::Duration timeout) {
  return connections_[0]->GetVersions(keys, timeout);
}

void StripedChannel::SetPullCompression(kv::CompressionType type) {
  for (auto& c : connections_) c->SetPullCompression(type);
}

void StripedChannel::SetPullTimeout(absl::Duration timeout) {
  for (auto& c : connections_) c->SetPullTimeout(timeout);
}

void StripedChannel::SetIdentity(const std::string& job_id, uint64_t incarnation) {
  for (auto& c : connections_) c->SetIdentity(job_id, incarnation);
}

const std::string& StripedChannel::address() const { return connections_[0]->address(); }
int StripedChannel::server_rank() const { return connections_[0]->server_rank(); }

int64_t StripedChannel::bytes_pushed() const {
  int64_t n = 0;
  for (const auto& c : connections_) n += c->bytes_pushed();
  return n;
}

int64_t StripedChannel::bytes_pushed_uncompressed() const {
  int64_t n = 0;
  for (const auto& c : connections_) n += c->bytes_pushed_uncompressed();
  return n;
}

int64_t StripedChannel::bytes_pulled() const {
  int64_t n = 0;
  for (const auto& c : connections_) n += c->bytes_pulled();
  return n;
}

int64_t StripedChannel::bytes_pulled_uncompressed() const {
  int64_t n = 0;
  for (const auto& c : connections_) n += c->bytes_pulled_uncompressed();
  return n;
}

int StripedChannel::ConnectionOf(uint64_t key) const {
  auto it = connection_of_.find(key);
  return it == connection_of_.end() ? -1 : it->second;
}

int DefaultConnectionsPerServer(bool tls) { return tls ? kTlsConnectionsPerServer : 1; }

absl::StatusOr<std::unique_ptr<ServerChannel>> ConnectPsClients(int server_rank, const std::string& address,
                                                                int worker_rank, absl::Duration connect_timeout,
                                                                int connections) {
  if (connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat("connections per server must be at least 1, not ", connections));
  }
  std::vector<std::unique_ptr<ServerChannel>> clients;
  for (int i = 0; i < connections; ++i) {
    // Each PsClient makes its own channel, and channels keep their own subchannels
    // (MakeChannel: GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL), so each is a connection of its own.
    DTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> c,
                            PsClient::Connect(address, server_rank, worker_rank, connect_timeout));
    if (connections == 1) return std::unique_ptr<ServerChannel>(std::move(c));
    clients.push_back(std::move(c));
  }
  return std::unique_ptr<ServerChannel>(new StripedChannel(std::move(clients)));
}

}  // namespace dtrain::worker
