#include "common/kv/message_batch.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include <grpcpp/impl/codegen/proto_buffer_reader.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace dtrain::kv {
namespace {

using google::protobuf::internal::WireFormatLite;
namespace pio = google::protobuf::io;

uint32_t BatchTag(int field) { return WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED); }

// The bytes [begin, end) of `slices` (consecutive), as sub-slices sharing their memory.
std::vector<grpc::Slice> Range(const std::vector<grpc::Slice>& slices, size_t begin, size_t end) {
  std::vector<grpc::Slice> out;
  size_t at = 0;
  for (const grpc::Slice& s : slices) {
    const size_t s_begin = at, s_end = at + s.size();
    at = s_end;
    if (s_end <= begin || s_begin >= end) continue;
    const size_t from = std::max(begin, s_begin) - s_begin, to = std::min(end, s_end) - s_begin;
    out.push_back(s.sub(from, to));
  }
  return out;
}

}  // namespace

grpc::ByteBuffer EncodeBatch(std::vector<grpc::ByteBuffer>& parts, int field) {
  std::vector<grpc::Slice> slices;
  for (grpc::ByteBuffer& part : parts) {
    std::string head;
    {
      pio::StringOutputStream sos(&head);
      pio::CodedOutputStream out(&sos);
      out.WriteTag(BatchTag(field));
      out.WriteVarint32(static_cast<uint32_t>(part.Length()));
    }
    slices.emplace_back(head);
    std::vector<grpc::Slice> own;
    if (part.Length() > 0 && part.Dump(&own).ok()) {
      for (grpc::Slice& s : own) slices.push_back(std::move(s));
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

bool IsBatch(grpc::ByteBuffer* buffer, int field) {
  std::vector<grpc::Slice> slices;
  if (buffer->Length() == 0 || !buffer->Dump(&slices).ok()) return false;
  for (const grpc::Slice& s : slices) {
    if (s.size() > 0) return s.begin()[0] == static_cast<uint8_t>(BatchTag(field));
  }
  return false;
}

absl::Status SplitBatch(grpc::ByteBuffer* buffer, int field, size_t max_parts, std::vector<grpc::ByteBuffer>* parts) {
  parts->clear();
  const size_t length = buffer->Length();
  if (length > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", length, " bytes is larger than 2 GiB"));
  }
  std::vector<grpc::Slice> slices;
  if (length > 0 && !buffer->Dump(&slices).ok()) return absl::InvalidArgumentError("unreadable batch");
  grpc::ProtoBufferReader reader(buffer);
  pio::CodedInputStream in(&reader);
  in.PushLimit(static_cast<int>(length));
  for (;;) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (tag != BatchTag(field)) {
      return absl::InvalidArgumentError(absl::StrCat("a batch holds field ", WireFormatLite::GetTagFieldNumber(tag),
                                                     " where only field ", field, " may be"));
    }
    uint32_t size = 0;
    if (!in.ReadVarint32(&size)) return absl::InvalidArgumentError("truncated length of a batch's part");
    const size_t begin = static_cast<size_t>(in.CurrentPosition());
    if (size > length - begin) {
      return absl::InvalidArgumentError(absl::StrCat("a batch's part ", parts->size(), " announces ", size,
                                                     " bytes but only ", length - begin, " follow"));
    }
    if (parts->size() == max_parts) {
      return absl::InvalidArgumentError(absl::StrCat("a batch of more than ", max_parts, " parts"));
    }
    if (!in.Skip(static_cast<int>(size))) return absl::InvalidArgumentError("truncated part of a batch");
    std::vector<grpc::Slice> range = Range(slices, begin, begin + size);
    parts->emplace_back(range.data(), range.size());
  }
  if (!in.ConsumedEntireMessage()) return absl::InvalidArgumentError("malformed tag in a batch");
  return absl::OkStatus();
}

}  // namespace dtrain::kv
