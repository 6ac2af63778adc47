// One server reached over several connections: a ServerChannel that spreads a worker's
// keys over N channels to the same server (N PsClients, each its own TCP connection and
// PushPull stream), so that the per-connection work of the transport (TLS encryption
// and decryption, HTTP/2 framing), which gRPC runs one connection at a time, can run on
// several cores at both ends.
//
// Each key is given to one connection on its first request and stays there, so the
// requests of one key keep their order (ServerChannel's contract); what the server does
// with them is unchanged: it merges each key's pushes in rank order whichever stream
// they came on, so the weights are bit-identical whatever N. Keys go to the connection
// with the fewest elements so far, so the bytes are shared out evenly when keys differ
// in size. The unary calls (Configure, InitKeys, GetState, GetVersions) use the first
// connection; settings go to all of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "services/worker/kv/server_channel.h"

namespace dtrain::worker {

class StripedChannel final : public ServerChannel {
 public:
  // `connections`: at least one, all to the same server.
  explicit StripedChannel(std::vector<std::unique_ptr<ServerChannel>> connections);

  Ticket Submit(const KeyRequest& request) override;
  absl::Status Wait(Ticket ticket, absl::Time deadline) override;
  bool WaitUntil(Ticket ticket, absl::Time until) override;
  absl::Status WaitAll(absl::Time deadline) override;
  std::vector<JoinNotice> TakeJoinNotices() override;

  absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                         absl::Duration timeout, int staleness = 0,
                         kv::CompressionType pull_compression = kv::CompressionType::kNone,
                         const kv::EpochLrSteps& epoch_lr = {}) override;
  absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                        const std::vector<std::vector<int>>& chains = {}) override;
  absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys,
                                                     absl::Duration timeout) override;
  absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys,
                                                          absl::Duration timeout) override;

  void SetPullCompression(kv::CompressionType type) override;
  void SetPullTimeout(absl::Duration timeout) override;
  void SetIdentity(const std::string& job_id, uint64_t incarnation) override;

  const std::string& address() const override;
  int server_rank() const override;
  int64_t bytes_pushed() const override;
  int64_t bytes_pushed_uncompressed() const override;
  int64_t bytes_pulled() const override;
  int64_t bytes_pulled_uncompressed() const override;

  // The connection `key` was given to (-1: none yet). For tests and the benchmark.
  int ConnectionOf(uint64_t key) const;

 private:
  // A ticket is the connection's own (>= 1) times N plus the connection's index: no
  // table to keep, and Wait may be called from any thread without a lock here.
  Ticket Outer(Ticket inner, int connection) const;
  ServerChannel& ConnectionOfTicket(Ticket ticket, Ticket* inner) const;

  std::vector<std::unique_ptr<ServerChannel>> connections_;
  // Written by Submit only, which one thread at a time calls.
  absl::flat_hash_map<uint64_t, int> connection_of_;
  std::vector<int64_t> elements_;  // given to each connection so far
};

// Connections per server when --connections-per-server is not given: 1 in plaintext,
// where one connection already moves bytes as fast as the cores copy them, and
// kTlsConnectionsPerServer with TLS (docs/security.md, "What it costs").
inline constexpr int kTlsConnectionsPerServer = 2;
int DefaultConnectionsPerServer(bool tls);

// A PsClient to `address` (PsClient::Connect) when `connections` is 1, else a
// StripedChannel over that many PsClients, each on a channel of its own.
absl::StatusOr<std::unique_ptr<ServerChannel>> ConnectPsClients(int server_rank, const std::string& address,
                                                                int worker_rank, absl::Duration connect_timeout,
                                                                int connections);

}  // namespace dtrain::worker
