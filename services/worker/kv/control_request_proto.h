// The control requests a worker sends a parameter server (Configure, InitKeys,
// GetState, GetVersions) and how it reads their answers, gRPC-free. PsClient sends
// these over gRPC; the tests' in-process channel hands the same requests to the
// server's ControlHandler and reads its answers here too, so both ask the same
// question and understand the answer alike (as key_request_proto.h does for PushPull).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/kv/epoch_lr.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/key_state.h"
#include "common/kv/optimizer.h"
#include "common/kvstore_mode.h"
#include "dtrain/v1/parameter_server.pb.h"

namespace dtrain::worker {

// `epoch_lr` goes as epoch_lr when enabled() (an elastic job's --lr-step-epochs).
v1::ConfigureRequest ConfigureRequestProto(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                           int staleness, kv::CompressionType pull_compression,
                                           const kv::EpochLrSteps& epoch_lr = {});

// The next InitKeys request, from keys[*next] on, with their chains (chains[i] for
// keys[i]; none past its end); advances *next past the keys it took. A request stays
// well under the 64 MB message limit (about 8 MB; a lone larger key still goes, alone).
v1::InitKeysRequest NextInitKeysRequest(const std::vector<kv::KeyState>& keys,
                                        const std::vector<std::vector<int>>& chains, size_t* next);

// `keys` empty: every key the server holds.
v1::GetStateRequest GetStateRequestProto(const std::vector<uint64_t>& keys);
// One streamed KeyState into `out` (filled as far as it could be read). A broken
// answer is INTERNAL naming the key: the job's own server sent it, so it is not the
// caller's argument.
absl::Status KeyStateFromProto(const v1::KeyState& ks, kv::KeyState* out);

// `keys` empty: every key the server holds. A worker speaks for its rank and, once set
// (ServerChannel::SetIdentity), its job and incarnation.
v1::GetVersionsRequest GetVersionsRequestProto(const std::vector<uint64_t>& keys, int worker_rank,
                                               const std::string& job_id, uint64_t incarnation);
// The versions answered, one per key asked for (`asked`: how many were named; 0: all).
// Another count is INTERNAL.
absl::StatusOr<std::vector<kv::KeyVersion>> VersionsFromProto(const v1::GetVersionsResponse& resp, size_t asked);

}  // namespace dtrain::worker
