// Several PushPull messages sent as one, so that a stream's queued answers leave in one
// write. A gRPC stream carries one write at a time, each waiting for the previous one's
// completion: a step's answers for a model of many small keys (ResNet-20: 65 keys in
// 1.09 MB) went out one after another, about 20 µs apart on loopback and more on a busy
// machine, for most of the step's pull time.
//
// A batch is a message whose only fields are `field` (length-delimited, repeated), each
// holding one whole message exactly as it would have been sent alone: the receiver
// splits it and handles the parts in order. Its first byte is the first byte of the
// field's tag, which no ordinary message of the stream starts with (the field is reserved
// for batches), so a batch is told apart by that byte; SplitBatch then checks every tag.
// Nothing is copied: the parts are the original slices, and the split parts are
// sub-slices of the received ones.
#pragma once

#include <cstddef>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"

namespace dtrain::kv {

// The most bytes a sender puts in one batch; a message larger than this goes alone.
// A batch is delivered only once all of it has arrived, so its bytes are the latency of
// every part in it, and on a link shared by F streams a message of B bytes takes B·F/rate:
// at 4 MB, 4 workers and 4 servers on 250 Mbit/s links each batch of 512 KB keys took half
// a second to land, the servers merged nothing until then, and a step's pushes and pulls
// ran one after the other instead of together (1.47 s a step for the wide mlp, links used
// 48% of the time). Small keys, which batching is for, still share a message.
inline constexpr size_t kMaxBatchBytes = 256 << 10;

// The parts, in order, as one message of repeated field `field`.
grpc::ByteBuffer EncodeBatch(std::vector<grpc::ByteBuffer>& parts, int field);

// Whether `buffer` starts with `field`'s length-delimited tag (so is a batch).
bool IsBatch(grpc::ByteBuffer* buffer, int field);

// The parts of a batch, in order. INVALID_ARGUMENT when a field other than `field`
// appears, a part's length runs past the bytes received, or there are more than
// `max_parts` parts (nothing from the wire is trusted for a size or a count).
absl::Status SplitBatch(grpc::ByteBuffer* buffer, int field, size_t max_parts, std::vector<grpc::ByteBuffer>* parts);

}  // namespace dtrain::kv
