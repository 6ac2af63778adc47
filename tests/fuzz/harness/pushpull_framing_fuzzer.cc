// The PushPull stream's framing (common/kv/tensor_codec): what a server does with a
// request off the wire, and a worker with a response. The input is one option byte
// and the message bytes; the option byte chooses how the bytes are cut into gRPC
// slices, because the decoder reads across slice boundaries (a real ByteBuffer is
// rarely one slice).
//
// After a successful decode a request goes through the server's own checks (where the
// tree has services/server/request_checks), the payload goes where a consumer puts it
// (BytesToFloats), and the message is encoded again with EncodeWithPayload and
// decoded: the header and payload must come back unchanged.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "common/kv/tensor_codec.h"
#include "google/protobuf/stubs/logging.h"
#include "dtrain/v1/parameter_server.pb.h"
#include "tests/fuzz/harness/fuzz_util.h"

// The server's checks of a decoded request (services/server/request_checks.h), where
// this tree has them: a fuzz target may call them without a server.
#if __has_include("services/server/request_checks.h")
#include "services/server/request_checks.h"
#define DTRAIN_FUZZ_REQUEST_CHECKS 1
#endif

namespace dtrain::fuzz {
namespace {

// options & 3: 0 one slice, 1 two, 2 three, 3 one per byte (the first 256 bytes);
// options >> 2: where the first cut falls, in 64ths of the message.
grpc::ByteBuffer Slices(uint8_t options, std::string_view bytes) {
  const int mode = options & 3;
  const size_t cut = bytes.size() * (options >> 2) / 64;
  std::vector<size_t> cuts;
  if (mode == 1 || mode == 2) cuts.push_back(cut);
  if (mode == 2) cuts.push_back(cut + (bytes.size() - cut) / 2);
  if (mode == 3) {
    for (size_t i = 1; i < bytes.size() && i <= 256; ++i) cuts.push_back(i);
  }
  cuts.push_back(bytes.size());
  std::vector<grpc::Slice> slices;
  size_t begin = 0;
  for (size_t end : cuts) {
    slices.emplace_back(bytes.data() + begin, end - begin);
    begin = end;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Decodes `bytes` as a `Message` whose tensor is field `field`, the way both ends do:
// the server always takes the payload (into memory sized by the announced length),
// the worker drops a payload it did not ask for (here: odd request ids).
template <typename Message>
void DecodeOne(uint8_t options, std::string_view bytes, int field) {
  grpc::ByteBuffer buffer = Slices(options, bytes);
  Message header;
  std::vector<char> payload;
  bool taken = false;
  int64_t payload_size = -2;
  const absl::Status st = kv::DecodeWithPayload(
      &buffer, &header, field,
      [&](const google::protobuf::MessageLite& h, size_t size) -> char* {
        if (static_cast<const Message&>(h).request_id() % 2 != 0) return nullptr;
        payload.resize(size);
        taken = true;
        return payload.data();
      },
      &payload_size);
  if (payload_size < -1) abort();  // the decoder must always say whether there was a payload
  if (!st.ok()) return;
#ifdef DTRAIN_FUZZ_REQUEST_CHECKS
  if constexpr (std::is_same_v<Message, v1::PushPullRequest>) {
    (void)server::ValidatePushPullRequest(header, payload_size);
    (void)server::DescribeRequest(header);
  }
#endif
  if (!taken) return;
  if (payload_size != static_cast<int64_t>(payload.size())) abort();

  // What a consumer does with it.
  const std::string bytes_copy(payload.data(), payload.size());
  std::vector<float> floats;
  (void)kv::BytesToFloats(bytes_copy, &floats);

  // Round trip through our own encoder. A second `data` field after the payload is
  // merged into the header by protobuf; the encoder wants it unset.
  Message plain = header;
  plain.clear_data();
  grpc::ByteBuffer again = kv::EncodeWithPayload(plain, field, grpc::Slice(bytes_copy));
  Message header2;
  std::string payload2;
  int64_t size2 = -1;
  const absl::Status st2 = kv::DecodeWithPayload(
      &again, &header2, field,
      [&](const google::protobuf::MessageLite&, size_t size) {
        payload2.resize(size);
        return payload2.data();
      },
      &size2);
  if (!st2.ok()) {
    std::fprintf(stderr, "re-encoded message does not decode: %s\n", std::string(st2.message()).c_str());
    abort();
  }
  if (payload2 != bytes_copy || header2.SerializeAsString() != plain.SerializeAsString()) {
    std::fprintf(stderr, "round trip changed the message\n");
    abort();
  }
}

}  // namespace
}  // namespace dtrain::fuzz

// Protobuf logs every invalid UTF-8 string it parses; at thousands of inputs a second
// that is all the output would show (and most of the time spent).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain;
  const fuzz::Input in = fuzz::SplitOptions(data, size);
  fuzz::DecodeOne<v1::PushPullRequest>(in.options, in.body, v1::PushPullRequest::kDataFieldNumber);
  fuzz::DecodeOne<v1::PushPullResponse>(in.options, in.body, v1::PushPullResponse::kDataFieldNumber);
  return 0;
}
