#include "common/kv/tensor_codec.h"

#include <cstring>
#include <string>
#include <vector>

#include <grpc/slice.h>
#include <grpcpp/impl/codegen/proto_buffer_reader.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace dtrain::kv {

using google::protobuf::internal::WireFormatLite;
namespace pio = google::protobuf::io;

std::string FloatsToBytes(const float* data, int64_t n) {
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(n) * sizeof(float));
}

absl::Status BytesToFloats(const std::string& bytes, std::vector<float>* out) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(bytes.size(), " bytes, not a whole number of float32s"));
  }
  out->resize(bytes.size() / sizeof(float));
  if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

grpc::Slice CopyToSlice(const float* data, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  grpc_slice s = grpc_slice_malloc(bytes);
  if (bytes > 0) std::memcpy(GRPC_SLICE_START_PTR(s), data, bytes);
  return grpc::Slice(s, grpc::Slice::STEAL_REF);
}

grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& header, int payload_field,
                                   grpc::Slice payload) {
  std::string head;
  header.AppendToString(&head);
  {
    pio::StringOutputStream sos(&head);
    pio::CodedOutputStream out(&sos);
    out.WriteTag(WireFormatLite::MakeTag(payload_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    out.WriteVarint32(static_cast<uint32_t>(payload.size()));
  }
  grpc::Slice slices[2] = {grpc::Slice(head), std::move(payload)};
  return grpc::ByteBuffer(slices, 2);
}

absl::Status DecodeWithPayload(grpc::ByteBuffer* buffer, google::protobuf::MessageLite* header, int payload_field,
                               const PayloadSink& sink, int64_t* payload_size, int64_t max_payload_bytes) {
  // A buffer is at most gRPC's receive limit, far below 2 GiB; anything larger is
  // refused rather than truncated into an `int`.
  const size_t length = buffer->Length();
  if (length > static_cast<size_t>(kMaxPayloadBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("message of ", length, " bytes is larger than 2 GiB"));
  }
  grpc::ProtoBufferReader reader(buffer);
  pio::CodedInputStream in(&reader);
  // Bounds every length protobuf reads (including its string reservations for the
  // other fields) by what was received; reaching it is the message's legitimate end.
  in.PushLimit(static_cast<int>(length));
  // The other fields, re-serialised as they come, are parsed by protobuf itself.
  std::string before, after;
  bool seen_payload = false;
  if (payload_size != nullptr) *payload_size = -1;
  const uint32_t payload_tag = WireFormatLite::MakeTag(payload_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;  // end of message (or a malformed tag, which protobuf reports below)
    if (tag == payload_tag && !seen_payload) {
      uint32_t size = 0;
      if (!in.ReadVarint32(&size)) return absl::InvalidArgumentError("truncated payload length");
      if (!header->ParseFromString(before)) return absl::InvalidArgumentError("malformed message header");
      seen_payload = true;
      if (payload_size != nullptr) *payload_size = size;
      const int64_t present = static_cast<int64_t>(length) - in.CurrentPosition();
      if (static_cast<int64_t>(size) > present) {
        return absl::InvalidArgumentError(
            absl::StrCat("payload of ", size, " bytes announced but only ", present, " bytes follow"));
      }
      if (static_cast<int64_t>(size) > max_payload_bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("payload of ", size, " bytes exceeds the limit of ", max_payload_bytes, " bytes"));
      }
      char* dest = sink ? sink(*header, size) : nullptr;
      const bool ok = dest != nullptr ? in.ReadRaw(dest, static_cast<int>(size)) : in.Skip(static_cast<int>(size));
      if (!ok) return absl::InvalidArgumentError(absl::StrCat("payload truncated (", size, " bytes announced)"));
      continue;
    }
    std::string& sink_bytes = seen_payload ? after : before;
    pio::StringOutputStream sos(&sink_bytes);
    pio::CodedOutputStream out(&sos);
    if (!WireFormatLite::SkipField(&in, tag, &out)) return absl::InvalidArgumentError("malformed field");
  }
  if (!in.ConsumedEntireMessage()) return absl::InvalidArgumentError("malformed tag");
  if (!seen_payload) {
    if (!header->ParseFromString(before)) return absl::InvalidArgumentError("malformed message");
  } else if (!after.empty() && !header->MergeFromString(after)) {
    return absl::InvalidArgumentError("malformed message tail");
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
