// The PushPull stream's framing (common/kv/tensor_codec) and what a server does with a
// request off the wire, and a worker with a response. The input is one option byte
// and the message bytes; the option byte chooses how the bytes are cut into gRPC
// slices, because the decoder reads across slice boundaries (a real ByteBuffer is
// rarely one slice).
//
// A request is decoded as the server's stream reactor decodes it (the payload taken
// only once `op` said push) and, where the tree has common/kv/push_pull_handler, handed
// to a PushPullHandler over a small ShardStore, twice (a retry), exactly as the reactor
// hands it: the request's checks, the worker's admission, a compressed push unpacked,
// the NaN check, the store's Push, Pull and PullDelta. The request id picks the store
// (sync or async, one worker or two, pull compression) and whether NaN is allowed.
// Every request must be answered exactly once per handling (a parked pull is dropped
// as when its stream goes), each answer naming the request, a data answer carrying
// exactly the key's weights or their packed change.
//
// The payload also goes where a consumer puts it (BytesToFloats), and the message is
// encoded again with EncodeWithPayload and decoded: the header and payload must come
// back unchanged. A compressed push's payload is unpacked by its codec
// (common/kv/compression) for element counts around its size.
//
// The same bytes are also read as a batch of answers (common/kv/message_batch): where
// they split, every part is decoded as a response, and the parts batched again must
// split into the same parts.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "common/kv/tensor_codec.h"
#include "google/protobuf/stubs/logging.h"

#if __has_include("common/kv/message_batch.h")
#include "common/kv/message_batch.h"
#define DTRAIN_FUZZ_BATCH 1
#endif
#include "dtrain/v1/parameter_server.pb.h"
#include "tests/fuzz/harness/fuzz_util.h"

// What the server does with a decoded request (common/kv/push_pull_handler.h), where
// this tree has it: driven without a server, as the local kvstore drives it.
#if __has_include("common/kv/push_pull_handler.h")
#include "absl/time/time.h"
#include "common/kv/push_pull_handler.h"
#include "common/kv/request_checks.h"
#include "common/kv/shard_store.h"
#define DTRAIN_FUZZ_HANDLER 1
#endif

// The gradient codecs (common/kv/compression), where this tree has them: a compressed
// push's payload is unpacked as the server does.
#if __has_include("common/kv/compression/gradient_codec.h")
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/kv/compression/gradient_codec.h"
#define DTRAIN_FUZZ_COMPRESSION 1
#endif

namespace dtrain::fuzz {
namespace {

#ifdef DTRAIN_FUZZ_COMPRESSION
// What the server does with a compressed push whose checks passed: unpack it for a
// key of some element count. Only the codec's exact size may decode; what decodes
// must pack again to the same values (decode(encode(decode(x))) == decode(x)).
void Unpack(const v1::PushPullRequest& req, const std::string& payload) {
  const kv::CompressionSpec spec{static_cast<kv::CompressionType>(req.compression()), req.gc_threshold()};
  if (!kv::ValidateSpec(spec).ok()) return;
  const std::unique_ptr<kv::GradientCodec> codec = kv::MakeCodec(spec);
  if (codec == nullptr) return;
  const int64_t size = static_cast<int64_t>(payload.size());
  // The element count whose packed size is nearest the payload's, and its neighbours
  // (keys of any size may be asked for: the count is the server's, not the wire's).
  // PackedBytes grows with the count: the least count that needs `size` bytes or more.
  int64_t lo = 0, hi = int64_t{1} << 26;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (codec->PackedBytes(mid) >= size) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const int64_t guess = lo;
  for (int64_t n : {guess - 1, guess, guess + 1, guess + 16, guess + 33}) {
    if (n < 0) continue;
    std::vector<float> out(static_cast<size_t>(n), 7.0f);
    const absl::Status s = codec->Decode(payload.data(), size, out.data(), n);
    if (s.ok() != (codec->PackedBytes(n) == size)) {
      std::fprintf(stderr, "decode of %lld bytes for %lld values: %s\n", static_cast<long long>(size),
                   static_cast<long long>(n), s.ok() ? "accepted a wrong size" : "refused the right size");
      abort();
    }
    if (!s.ok()) {
      for (float v : out) {
        if (v != 7.0f) abort();  // a refused decode writes nothing
      }
      continue;
    }
    bool finite = true;
    for (float v : out) finite = finite && std::isfinite(v);
    if (!finite) continue;
    std::vector<float> residual(static_cast<size_t>(n), 0.0f);
    std::string again(static_cast<size_t>(codec->PackedBytes(n)), '\0');
    codec->Encode(out.data(), residual.data(), n, again.data());
    std::vector<float> back(static_cast<size_t>(n));
    if (!codec->Decode(again.data(), static_cast<int64_t>(again.size()), back.data(), n).ok()) abort();
    // int8 derives its scale from the values it packs (their largest magnitude / 127):
    // bytes from the wire whose largest |q| is below 127, or -128, unpack to values that
    // pack again on another scale. What holds for it is the codec's own bound: every
    // value comes back within half of that scale.
    float int8_bound = 0.0f;
    if (spec.type == kv::CompressionType::kInt8) {
      float max_abs = 0.0f;
      for (float v : out) max_abs = std::max(max_abs, std::fabs(v));
      // A scale below the smallest normal float sends zeros (its reciprocal would not be finite).
      int8_bound = max_abs / 127.0f < std::numeric_limits<float>::min() ? max_abs : max_abs / 127.0f * 0.5f * 1.0001f;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (spec.type == kv::CompressionType::kInt8) {
        if (std::fabs(back[i] - out[i]) > int8_bound) {
          std::fprintf(stderr, "int8: value %lld unpacked as %g packs again as %g, beyond half a quantum\n",
                       static_cast<long long>(i), out[i], back[i]);
          abort();
        }
        continue;
      }
      if (back[i] != out[i]) {
        std::fprintf(stderr, "%s: value %lld unpacked as %g packs again as %g\n", kv::CompressionTypeName(spec.type),
                     static_cast<long long>(i), out[i], back[i]);
        abort();
      }
    }
  }
}
#endif

#ifdef DTRAIN_FUZZ_HANDLER
// The keys the fuzzed server holds: the seed corpus's push names (3 << 24) | 1 (four
// floats), its pull key 5.
struct FuzzKey {
  uint64_t key;
  int64_t numel;
};
constexpr FuzzKey kKeys[] = {{(uint64_t{3} << 24) | 1, 4}, {5, 16}, {0, 1}};

int64_t NumelOf(uint64_t key) {
  for (const FuzzKey& k : kKeys) {
    if (k.key == key) return k.numel;
  }
  return -1;
}

// Checks every answer of one request as the reactor would write it.
class CheckingSink final : public kv::AnswerSink {
 public:
  explicit CheckingSink(const v1::PushPullRequest& req) : req_(req) {}

  void Send(const v1::PushPullResponse& resp) override {
    Check(resp);
    // Weights are always answered with data, unless only the version was asked for.
    if (resp.code() == 0 && req_.op() != v1::OP_PUSH && !req_.version_only()) Fail("weights answered without data");
  }

  DataAnswer Prepare(const char* data, size_t bytes) override {
    // Copy all of it, as the reactor does: ASan says whether the store's buffer
    // holds `bytes` (kept, so that the copy cannot be optimised away).
    data_.assign(data, bytes);
    return [this, bytes](const v1::PushPullResponse& resp) {
      Check(resp);
      if (resp.code() != 0) Fail("an error answered with data");
      const int64_t numel = NumelOf(resp.key());
      int64_t want = numel * static_cast<int64_t>(sizeof(float));
      if (resp.compression() != v1::COMPRESSION_NONE) {
        const auto codec = kv::MakeCodec({static_cast<kv::CompressionType>(resp.compression()), 0.0f});
        if (codec == nullptr) Fail("a packed change of no codec");
        want = codec->PackedBytes(numel);
      }
      if (numel < 0 || static_cast<int64_t>(bytes) != want) Fail("data of the wrong size for the key");
    };
  }

  int answers() const { return answers_; }
  const v1::PushPullResponse& last() const { return last_; }

 private:
  void Check(const v1::PushPullResponse& resp) {
    ++answers_;
    last_ = resp;
    if (resp.request_id() != req_.request_id()) Fail("an answer names another request");
  }
  [[noreturn]] static void Fail(const char* what) {
    std::fprintf(stderr, "handler: %s\n", what);
    abort();
  }

  const v1::PushPullRequest req_;
  int answers_ = 0;
  v1::PushPullResponse last_;
  std::string data_;  // the last data prepared
};

// A server's shard for this request: the request id's low bits pick it.
void Configure(uint64_t variant, kv::ShardStore* store) {
  kv::StoreConfig config;
  const bool async = (variant & 1) != 0;
  config.mode = async ? kv::MergeMode::kAsync : kv::MergeMode::kSync;
  config.num_workers = (variant & 8) != 0 ? 2 : 1;
  constexpr kv::CompressionType kPullCodecs[] = {kv::CompressionType::kNone, kv::CompressionType::kFp16,
                                                 kv::CompressionType::kInt8, kv::CompressionType::kOneBit};
  if (!async) config.pull_compression = kPullCodecs[(variant >> 1) & 3];
  if (!store->Configure(config).ok()) abort();
  for (const FuzzKey& k : kKeys) {
    const std::vector<float> init(static_cast<size_t>(k.numel), 0.25f);
    if (!store->InitKey(k.key, {k.numel}, init.data(), k.numel).ok()) abort();
  }
}

// What the server does with the request: handled twice (a retry), each handling
// answered exactly once; a refusal is what the last answer says.
void Serve(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes, bool payload_taken) {
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  kv::ShardStore store([now] { return now; });
  Configure(req.request_id(), &store);
  kv::StreamOptions options;
  options.allow_non_finite = (req.request_id() & 4) != 0;
  auto sink = std::make_shared<CheckingSink>(req);
  kv::PushPullHandler handler(&store, options, sink, [now] { return now; });
  for (int i = 0; i < 2; ++i) {
    const absl::Status refusal = handler.Handle(req, payload, payload_bytes, payload_taken);
    // A pull still parked waits for a worker that will never push: its stream is gone.
    store.DropPulls(handler.owner());
    if (sink->answers() != i + 1) {
      std::fprintf(stderr, "handler: %d answers to %d handlings\n", sink->answers(), i + 1);
      abort();
    }
    if (!refusal.ok() &&
        (sink->last().code() != static_cast<int>(refusal.code()) || sink->last().message() != refusal.message())) {
      std::fprintf(stderr, "handler: refused with '%s' but answered '%s'\n", std::string(refusal.message()).c_str(),
                   sink->last().message().c_str());
      abort();
    }
  }
}
#endif

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
// the server takes the payload (into memory sized by the announced length) once `op`
// said push, the worker drops a payload it did not ask for (here: odd request ids).
template <typename Message>
void DecodeOne(uint8_t options, std::string_view bytes, int field) {
  constexpr bool kRequest = std::is_same_v<Message, v1::PushPullRequest>;
  grpc::ByteBuffer buffer = Slices(options, bytes);
  Message header;
  std::vector<float> payload;  // floats, as the reactor's: the handler reads it as a gradient
  bool taken = false;
  int64_t payload_size = -2;
  size_t taken_size = 0;
  const absl::Status st = kv::DecodeWithPayload(
      &buffer, &header, field,
      [&](const google::protobuf::MessageLite& h, size_t size) -> char* {
        const auto& m = static_cast<const Message&>(h);
        if constexpr (kRequest) {
          if (m.op() != v1::OP_PUSH && m.op() != v1::OP_PUSH_PULL) return nullptr;
        } else {
          if (m.request_id() % 2 != 0) return nullptr;
        }
        payload.resize((size + sizeof(float) - 1) / sizeof(float));
        taken = true;
        taken_size = size;
        return reinterpret_cast<char*>(payload.data());
      },
      &payload_size);
  if (payload_size < -1) abort();  // the decoder must always say whether there was a payload
  if (!st.ok()) return;
#ifdef DTRAIN_FUZZ_HANDLER
  if constexpr (kRequest) {
    Serve(header, payload.data(), payload_size, payload_size > 0 && taken);
    (void)kv::DescribeRequest(header);
  }
#endif
  if (!taken) return;
  if (payload_size != static_cast<int64_t>(taken_size)) abort();
  const std::string bytes_copy(reinterpret_cast<const char*>(payload.data()), taken_size);
#if defined(DTRAIN_FUZZ_HANDLER) && defined(DTRAIN_FUZZ_COMPRESSION)
  if constexpr (kRequest) {
    if (header.compression() != v1::COMPRESSION_NONE && kv::ValidatePushPullRequest(header, payload_size).ok()) {
      Unpack(header, bytes_copy);
    }
  }
#endif

  // What a consumer does with it.
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

#ifdef DTRAIN_FUZZ_BATCH
std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (b.Length() == 0 || !b.Dump(&slices).ok()) return out;
  for (const auto& sl : slices) out.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return out;
}

// The worker's reading of a batch: split, then each part as an answer of its own.
void SplitOne(uint8_t options, std::string_view bytes) {
  constexpr int kField = v1::PushPullResponse::kBatchFieldNumber;
  grpc::ByteBuffer buffer = Slices(options, bytes);
  if (!kv::IsBatch(&buffer, kField)) return;
  std::vector<grpc::ByteBuffer> parts;
  const absl::Status st = kv::SplitBatch(&buffer, kField, 64, &parts);
  if (parts.size() > 64) abort();
  std::vector<std::string> flat;
  for (const grpc::ByteBuffer& part : parts) flat.push_back(Flatten(part));
  for (const std::string& part : flat)
    DecodeOne<v1::PushPullResponse>(options, part, v1::PushPullResponse::kDataFieldNumber);
  if (!st.ok()) return;
  grpc::ByteBuffer again = kv::EncodeBatch(parts, kField);
  std::vector<grpc::ByteBuffer> parts2;
  if (!kv::SplitBatch(&again, kField, 64, &parts2).ok() || parts2.size() != flat.size()) abort();
  for (size_t i = 0; i < flat.size(); ++i) {
    if (Flatten(parts2[i]) != flat[i]) abort();
  }
}
#endif

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
#ifdef DTRAIN_FUZZ_BATCH
  fuzz::SplitOne(in.options, in.body);
#endif
  return 0;
}
