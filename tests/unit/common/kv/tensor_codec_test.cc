// The hand-assembled PushPull buffers must be ordinary protobuf on the wire.
#include "common/kv/tensor_codec.h"

#include <cstring>
#include <string>
#include <vector>

#include "dtrain/v1/parameter_server.pb.h"
#include "gtest/gtest.h"
#include "tests/unit/common/kv/byte_buffers.h"

namespace dtrain::kv {
namespace {

using testing::Flatten;
using testing::FromString;

constexpr int kField = v1::PushPullRequest::kDataFieldNumber;

TEST(TensorCodecTest, EncodedBufferIsTheProtobufEncoding) {
  const std::vector<float> grad = {1.5f, -2.0f, 3.25f};
  v1::PushPullRequest header;
  header.set_request_id(7);
  header.set_key(42);
  header.set_step(3);
  grpc::ByteBuffer buf = EncodeWithPayload(header, kField, CopyToSlice(grad.data(), 3));
  v1::PushPullRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buf)));
  EXPECT_EQ(parsed.request_id(), 7u);
  EXPECT_EQ(parsed.key(), 42u);
  ASSERT_EQ(parsed.data().size(), 12u);
  EXPECT_EQ(0, std::memcmp(parsed.data().data(), grad.data(), 12));
}

TEST(TensorCodecTest, DecodeWritesThePayloadWhereTheSinkSays) {
  v1::PushPullRequest msg;
  msg.set_request_id(9);
  msg.set_key(5);
  const std::vector<float> grad = {4.0f, 5.0f};
  msg.set_data(std::string(reinterpret_cast<const char*>(grad.data()), 8));
  msg.set_min_version(11);  // after `data` in field order: still parsed
  grpc::ByteBuffer buf = FromString(msg.SerializeAsString());
  std::vector<float> out(2, 0.0f);
  uint64_t id_seen = 0;
  v1::PushPullRequest header;
  int64_t size = 0;
  ASSERT_TRUE(DecodeWithPayload(
                  &buf, &header, kField,
                  [&](const google::protobuf::MessageLite& h, size_t n) {
                    id_seen = static_cast<const v1::PushPullRequest&>(h).request_id();
                    EXPECT_EQ(n, 8u);
                    return reinterpret_cast<char*>(out.data());
                  },
                  &size)
                  .ok());
  EXPECT_EQ(id_seen, 9u);
  EXPECT_EQ(size, 8);
  EXPECT_EQ(out, grad);
  EXPECT_EQ(header.key(), 5u);
  EXPECT_EQ(header.min_version(), 11);
  EXPECT_TRUE(header.data().empty());
}

TEST(TensorCodecTest, NoPayloadAndDroppedPayload) {
  v1::PushPullRequest msg;
  msg.set_request_id(3);
  grpc::ByteBuffer plain = EncodeMessage(msg);
  v1::PushPullRequest header;
  int64_t size = 0;
  ASSERT_TRUE(DecodeWithPayload(&plain, &header, kField, nullptr, &size).ok());
  EXPECT_EQ(header.request_id(), 3u);
  EXPECT_EQ(size, -1);

  const float x = 1.0f;
  grpc::ByteBuffer with = EncodeWithPayload(msg, kField, CopyToSlice(&x, 1));
  ASSERT_TRUE(DecodeWithPayload(
                  &with, &header, kField, [](auto&, size_t) { return nullptr; }, &size)
                  .ok());
  EXPECT_EQ(size, 4);
}

TEST(TensorCodecTest, TruncatedAndGarbageInputAreErrors) {
  v1::PushPullRequest msg;
  msg.set_request_id(1);
  msg.set_data(std::string(400, 'x'));
  std::string bytes = msg.SerializeAsString();
  grpc::ByteBuffer cut = FromString(bytes.substr(0, bytes.size() - 10));
  std::vector<char> sink(400);
  v1::PushPullRequest header;
  EXPECT_FALSE(DecodeWithPayload(&cut, &header, kField, [&](auto&, size_t) { return sink.data(); }).ok());
  grpc::ByteBuffer garbage = FromString(std::string("\xff\xff\xff\xff\xff\xff", 6));
  EXPECT_FALSE(DecodeWithPayload(&garbage, &header, kField, nullptr).ok());
}

// The 18 bytes a hostile client sent: request_id 1, OP_PUSH, rank 0, step 0, key 3,
// DTYPE_FLOAT32, then `data` announcing 2^31 bytes that never come.
std::string EighteenBytesAnnouncingTwoGiB() {
  return std::string("\x08\x01\x10\x01\x18\x00\x20\x00\x28\x03\x30\x01\x3a\x80\x80\x80\x80\x08", 18);
}

TEST(TensorCodecTest, AnnouncedLengthBeyondTheBytesPresentIsRefusedBeforeTheSink) {
  ASSERT_EQ(EighteenBytesAnnouncingTwoGiB().size(), 18u);
  grpc::ByteBuffer buf = FromString(EighteenBytesAnnouncingTwoGiB());
  v1::PushPullRequest header;
  int64_t size = 0;
  bool sink_called = false;
  const absl::Status s = DecodeWithPayload(
      &buf, &header, kField,
      [&](auto&, size_t) {
        sink_called = true;
        return nullptr;
      },
      &size);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "payload of 2147483648 bytes announced but only 0 bytes follow");
  EXPECT_FALSE(sink_called) << "nothing may be allocated for bytes that are not there";
  // The header is known, so the server can still answer the request by its id.
  EXPECT_EQ(header.request_id(), 1u);
}

TEST(TensorCodecTest, OneByteShortIsRefusedBeforeTheSink) {
  v1::PushPullRequest msg;
  msg.set_request_id(2);
  msg.set_data(std::string(1000, 'x'));
  const std::string bytes = msg.SerializeAsString();
  grpc::ByteBuffer cut = FromString(bytes.substr(0, bytes.size() - 1));
  v1::PushPullRequest header;
  bool sink_called = false;
  const absl::Status s = DecodeWithPayload(&cut, &header, kField, [&](auto&, size_t) {
    sink_called = true;
    return nullptr;
  });
  EXPECT_EQ(s.message(), "payload of 1000 bytes announced but only 999 bytes follow");
  EXPECT_FALSE(sink_called);
}

TEST(TensorCodecTest, PayloadOverTheCallersLimitIsRefusedBeforeTheSink) {
  v1::PushPullRequest msg;
  msg.set_request_id(4);
  msg.set_data(std::string(64, 'x'));
  grpc::ByteBuffer buf = FromString(msg.SerializeAsString());
  v1::PushPullRequest header;
  bool sink_called = false;
  auto sink = [&](auto&, size_t) {
    sink_called = true;
    return nullptr;
  };
  const absl::Status s = DecodeWithPayload(&buf, &header, kField, sink, nullptr, /*max_payload_bytes=*/63);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "payload of 64 bytes exceeds the limit of 63 bytes");
  EXPECT_FALSE(sink_called);
  grpc::ByteBuffer again = FromString(msg.SerializeAsString());
  EXPECT_TRUE(DecodeWithPayload(&again, &header, kField, sink, nullptr, /*max_payload_bytes=*/64).ok());
  EXPECT_TRUE(sink_called);
}

TEST(TensorCodecTest, HugeLengthsInOtherFieldsAreErrorsNotAllocations) {
  // An unknown length-delimited field 15 announcing ~2 GiB, then nothing.
  grpc::ByteBuffer buf = FromString(std::string("\x08\x01\x7a\xff\xff\xff\xff\x07", 8));
  v1::PushPullRequest header;
  EXPECT_EQ(DecodeWithPayload(&buf, &header, kField, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FloatBytesTest, RoundTripKeepsEveryBit) {
  const std::vector<float> in = {1.5f, -0.0f, 3.0e-39f /* subnormal */, -7.25f};
  const std::string bytes = FloatsToBytes(in.data(), static_cast<int64_t>(in.size()));
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_EQ(0, std::memcmp(bytes.data(), in.data(), 16));
  std::vector<float> out = {9.0f};  // replaced, not appended to
  ASSERT_TRUE(BytesToFloats(bytes, &out).ok());
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(0, std::memcmp(out.data(), in.data(), 16));
}

TEST(FloatBytesTest, EmptyIsEmpty) {
  EXPECT_EQ(FloatsToBytes(nullptr, 0), "");
  std::vector<float> out = {1.0f, 2.0f};
  ASSERT_TRUE(BytesToFloats("", &out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(FloatBytesTest, SizeNotAMultipleOfFourIsInvalidArgument) {
  std::vector<float> out;
  const absl::Status s = BytesToFloats(std::string(6, 'x'), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "6 bytes, not a whole number of float32s");
}

}  // namespace
}  // namespace dtrain::kv
