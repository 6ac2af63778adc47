// A worker's connection to one parameter server over gRPC: unary Configure/InitKeys/
// GetState/GetVersions, and one long-lived PushPull stream on which requests are
// pipelined. Implements ServerChannel (server_channel.h, which states the contract).
//
// A reader thread matches responses to tickets by request_id and writes pulled
// weights straight into the caller's buffer; a writer thread sends what Submit queued,
// lowest key first, batched once the server says it reads batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/worker/kv/server_channel.h"

namespace dtrain::worker {

class PsClient final : public ServerChannel {
 public:
  // Opens the channel and the PushPull stream. UNAVAILABLE (naming the address) when
  // the server cannot be reached within `connect_timeout`. A zero timeout does not
  // wait (a server known dead): if it cannot be reached, the stream and every call
  // fail UNAVAILABLE, as for a server that died later.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const std::string& address, int server_rank, int worker_rank,
                                                           absl::Duration connect_timeout);
  ~PsClient() override;  // closes the stream; pending tickets fail with CANCELLED

  // Builds the PushPullRequest (PushPullRequest.exact_version, version_only and
  // pull_delta from the target) and queues it; the push's bytes are lent to gRPC, not
  // copied, until Wait(ticket) returns (or the client is destroyed).
  Ticket Submit(const KeyRequest& request) override;
  absl::Status Wait(Ticket ticket, absl::Time deadline) override;
  bool WaitUntil(Ticket ticket, absl::Time until) override;
  absl::Status WaitAll(absl::Time deadline) override;
  std::vector<JoinNotice> TakeJoinNotices() override;

  absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                         absl::Duration timeout, int staleness = 0,
                         kv::CompressionType pull_compression = kv::CompressionType::kNone,
                         const kv::EpochLrSteps& epoch_lr = {}) override;
  // Sends keys in requests of at most a few MB each.
  absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                        const std::vector<std::vector<int>>& chains = {}) override;
  absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys,
                                                     absl::Duration timeout) override;
  absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys,
                                                          absl::Duration timeout) override;

  void SetPullCompression(kv::CompressionType type) override;
  // Carried as PushPullRequest.timeout_ms.
  void SetPullTimeout(absl::Duration timeout) override;
  void SetIdentity(const std::string& job_id, uint64_t incarnation) override;

  const std::string& address() const override;
  int server_rank() const override;
  int64_t bytes_pushed() const override;
  int64_t bytes_pushed_uncompressed() const override;
  int64_t bytes_pulled() const override;
  int64_t bytes_pulled_uncompressed() const override;

 private:
  struct Impl;
  explicit PsClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::worker
