// The PushPullRequest header that carries one KeyRequest (server_channel.h) to a
// parameter server. Every ServerChannel builds its requests here: PsClient sends the
// header over gRPC with the push's bytes as its data field, and the tests' in-process
// channel hands the same header and bytes to kv::PushPullHandler, so both ask the
// server the same question.
#pragma once

#include <cstdint>
#include <string>

#include "common/kv/compression/gradient_codec.h"
#include "dtrain/v1/parameter_server.pb.h"
#include "services/worker/kv/server_channel.h"

namespace dtrain::worker {

// What a channel adds to every request: who asks, and how long a pull may wait.
struct RequestSender {
  int worker_rank = 0;
  // Recovery (ServerChannel::SetIdentity); "" / 0: not sent.
  std::string job_id;
  uint64_t incarnation = 0;
  // ServerChannel::SetPullTimeout in milliseconds; 0: the server's own.
  int64_t pull_timeout_ms = 0;
  // ServerChannel::SetPullCompression was given a codec: a push-pull of
  // Target::kDelta may be answered with the packed change.
  bool pull_delta = false;
};

// The header of `request` (already checked by ValidateKeyRequest) without its
// request id, which the channel numbers. A push's data is `request.payload`, sent as
// the request's data field; the header says how it is packed. `pull_delta()` of the
// result tells whether the answer may be a packed change to step + 1.
v1::PushPullRequest KeyRequestProto(const KeyRequest& request, const RequestSender& sender);

// Whether `answer` to a push-pull of `step` may be a packed change by `pull_codec`
// (null: the channel has none): "" if so, else what is wrong with it, for the channel's
// error. `delta_asked`: the request's pull_delta().
std::string PackedAnswerProblem(const v1::PushPullResponse& answer, bool delta_asked, int64_t step,
                                const kv::GradientCodec* pull_codec);

}  // namespace dtrain::worker
