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

// The parts, in order, as one message of repeated field `field`.
grpc::ByteBuffer EncodeBatch(std::vector<grpc::ByteBuffer>& parts, int field);

// Whether `buffer` starts with `field`'s length-delimited tag (so is a batch).
bool IsBatch(grpc::ByteBuffer* buffer, int field);

// The parts of a batch, in order. INVALID_ARGUMENT when a field other than `field`
// appears, a part's length runs past the bytes received, or there are more than
// `max_parts` parts (nothing from the wire is trusted for a size or a count).
absl::Status SplitBatch(grpc::ByteBuffer* buffer, int field, size_t max_parts, std::vector<grpc::ByteBuffer>* parts);

}  // namespace dtrain::kv
