// Wire encoding for messages that carry one tensor in a `bytes` field (the PushPull
// stream's requests and responses), without protobuf's copies of the tensor.
//
// A plain protobuf `bytes` field costs a copy into the message, a copy into gRPC's
// wire buffer and, on the receiving side, a copy out of the wire buffer into the
// message and another into the tensor. Here the tensor travels as a gRPC slice of its
// own behind the rest of the message (the same bytes protobuf would produce, since a
// field may come last), and is read straight from the received slices into its final
// place: one copy on each side. Any protobuf peer still reads and writes these
// messages as ordinary ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"

namespace dtrain::kv {

// For the messages that carry floats in ordinary protobuf `bytes` fields (InitKeys,
// GetState): the floats' bytes in host order, which is little-endian on every machine
// we run on.
std::string FloatsToBytes(const float* data, int64_t n);

// The floats in `bytes`, into *out (resized). INVALID_ARGUMENT "6 bytes, not a whole
// number of float32s" when the size is not a multiple of 4; callers prefix what the
// bytes were ("key 3: values has ").
absl::Status BytesToFloats(const std::string& bytes, std::vector<float>* out);

// `message` serialised into a one-slice buffer (messages without a tensor).
grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message);

// A slice holding a copy of `n` floats, in memory gRPC owns and frees when sent.
grpc::Slice CopyToSlice(const float* data, int64_t n);

// `header` serialised (its field `payload_field` must be unset), then field
// `payload_field` holding the bytes of `payload`.
grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& header, int payload_field, grpc::Slice payload);

// Where the payload of a message goes: given the fields parsed so far and the
// payload's size, a pointer to `size` writable bytes, or null to drop the payload.
// Fields that follow the payload on the wire are not visible to the sink (our own
// encoder puts the payload last).
using PayloadSink = std::function<char*(const google::protobuf::MessageLite& header, size_t size)>;

// The most payload DecodeWithPayload accepts unless told otherwise: what a
// CodedInputStream can address at all (its sizes are `int`).
inline constexpr int64_t kMaxPayloadBytes = (int64_t{1} << 31) - 1;

// Parses `buffer` into `header`, except field `payload_field` (length-delimited),
// whose bytes go to `sink`. Sets *payload_size (when non-null) to the payload's size,
// or -1 if the message has none. INVALID_ARGUMENT for malformed input.
//
// Nothing from the wire is trusted for a size: a payload length larger than the
// bytes that actually follow it in `buffer`, or than `max_payload_bytes`, is refused
// before `sink` is called, so a short message announcing gigabytes costs nothing.
absl::Status DecodeWithPayload(grpc::ByteBuffer* buffer, google::protobuf::MessageLite* header, int payload_field,
                               const PayloadSink& sink, int64_t* payload_size = nullptr,
                               int64_t max_payload_bytes = kMaxPayloadBytes);

}  // namespace dtrain::kv
