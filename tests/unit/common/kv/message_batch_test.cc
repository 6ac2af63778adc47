// Batches of PushPull answers: ordinary protobuf on the wire (a `repeated bytes batch`
// field), split back into the very answers sent, and malformed ones refused by name.
#include "common/kv/message_batch.h"

#include <string>
#include <vector>

#include "common/kv/tensor_codec.h"
#include "dtrain/v1/parameter_server.pb.h"
#include "gtest/gtest.h"
#include "tests/unit/common/kv/byte_buffers.h"

namespace dtrain::kv {
namespace {

constexpr int kField = v1::PushPullResponse::kBatchFieldNumber;

using testing::Flatten;
using testing::FromString;

// An answer as the server sends it: a header and the weights as a slice of their own.
grpc::ByteBuffer Answer(uint64_t id, int floats) {
  v1::PushPullResponse r;
  r.set_request_id(id);
  r.set_key(id * 10);
  r.set_version(7);
  std::vector<float> w(floats, static_cast<float>(id));
  return EncodeWithPayload(r, v1::PushPullResponse::kDataFieldNumber, CopyToSlice(w.data(), floats));
}

TEST(MessageBatchTest, AnswersComeBackWholeAndInOrderAndTheBatchIsPlainProtobuf) {
  std::vector<grpc::ByteBuffer> sent = {Answer(1, 3), Answer(2, 0), Answer(3, 1000)};
  std::vector<std::string> want;
  for (const auto& b : sent) want.push_back(Flatten(b));
  grpc::ByteBuffer batch = EncodeBatch(sent, kField);
  // Any protobuf reader sees the answers as the batch field's entries.
  v1::PushPullResponse as_proto;
  ASSERT_TRUE(as_proto.ParseFromString(Flatten(batch)));
  ASSERT_EQ(as_proto.batch_size(), 3);
  EXPECT_EQ(as_proto.batch(2), want[2]);
  EXPECT_EQ(as_proto.request_id(), 0u);

  ASSERT_TRUE(IsBatch(&batch, kField));
  std::vector<grpc::ByteBuffer> parts;
  ASSERT_TRUE(SplitBatch(&batch, kField, 16, &parts).ok());
  ASSERT_EQ(parts.size(), 3u);
  for (size_t i = 0; i < parts.size(); ++i) EXPECT_EQ(Flatten(parts[i]), want[i]) << i;
  v1::PushPullResponse third;
  int64_t payload = -1;
  std::vector<float> out(1000);
  ASSERT_TRUE(DecodeWithPayload(
                  &parts[2], &third, v1::PushPullResponse::kDataFieldNumber,
                  [&](const google::protobuf::MessageLite&, size_t) { return reinterpret_cast<char*>(out.data()); },
                  &payload)
                  .ok());
  EXPECT_EQ(third.request_id(), 3u);
  EXPECT_EQ(payload, 4000);
  EXPECT_EQ(out[999], 3.0f);
}

TEST(MessageBatchTest, AnOrdinaryAnswerIsNotABatch) {
  grpc::ByteBuffer one = Answer(5, 4);
  EXPECT_FALSE(IsBatch(&one, kField));
  grpc::ByteBuffer empty;
  EXPECT_FALSE(IsBatch(&empty, kField));
  // An answer whose defaults are all omitted starts with another field still.
  v1::PushPullResponse r;
  r.set_code(5);
  grpc::ByteBuffer code_only = EncodeMessage(r);
  EXPECT_FALSE(IsBatch(&code_only, kField));
}

TEST(MessageBatchTest, MalformedBatchesAreRefusedNamingWhatIsWrong) {
  std::vector<grpc::ByteBuffer> parts;
  // A part announcing more bytes than follow: 0x52 (field 10, length-delimited), 100, "abc".
  grpc::ByteBuffer long_part =
      FromString(std::string("\x52\x64"
                             "abc",
                             5));
  absl::Status s = SplitBatch(&long_part, kField, 16, &parts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("announces 100 bytes but only 3 follow"), std::string::npos) << s;
  // Another field inside a batch: field 10, then field 1 (varint).
  grpc::ByteBuffer mixed = FromString(std::string("\x52\x01x\x08\x01", 5));
  s = SplitBatch(&mixed, kField, 16, &parts);
  EXPECT_NE(s.message().find("field 1 where only field 10 may be"), std::string::npos) << s;
  // More parts than allowed.
  std::vector<grpc::ByteBuffer> many;
  for (int i = 0; i < 5; ++i) many.push_back(Answer(i + 1, 1));
  grpc::ByteBuffer five = EncodeBatch(many, kField);
  s = SplitBatch(&five, kField, 4, &parts);
  EXPECT_NE(s.message().find("more than 4 parts"), std::string::npos) << s;
  // A truncated length.
  grpc::ByteBuffer cut = FromString(std::string("\x52\xff", 2));
  EXPECT_FALSE(SplitBatch(&cut, kField, 16, &parts).ok());
}

}  // namespace
}  // namespace dtrain::kv

namespace dtrain::kv {
namespace {

// Requests batch in field 18, whose tag takes two bytes on the wire.
TEST(MessageBatchTest, RequestsWithATwoByteTagSplitBackIntoThePushesSent) {
  constexpr int kRequests = v1::PushPullRequest::kBatchFieldNumber;
  std::vector<grpc::ByteBuffer> sent;
  for (uint64_t id = 1; id <= 3; ++id) {
    v1::PushPullRequest r;
    r.set_request_id(id);
    r.set_op(v1::OP_PUSH_PULL);
    r.set_key(id);
    std::vector<float> g(5, static_cast<float>(id));
    sent.push_back(EncodeWithPayload(r, v1::PushPullRequest::kDataFieldNumber, CopyToSlice(g.data(), 5)));
  }
  grpc::ByteBuffer batch = EncodeBatch(sent, kRequests);
  ASSERT_TRUE(IsBatch(&batch, kRequests));
  std::vector<grpc::ByteBuffer> parts;
  ASSERT_TRUE(SplitBatch(&batch, kRequests, 16, &parts).ok());
  ASSERT_EQ(parts.size(), 3u);
  for (uint64_t id = 1; id <= 3; ++id) {
    v1::PushPullRequest r;
    std::vector<float> g(5);
    ASSERT_TRUE(DecodeWithPayload(
                    &parts[id - 1], &r, v1::PushPullRequest::kDataFieldNumber,
                    [&](const google::protobuf::MessageLite&, size_t) { return reinterpret_cast<char*>(g.data()); })
                    .ok());
    EXPECT_EQ(r.request_id(), id);
    EXPECT_EQ(g[4], static_cast<float>(id));
  }
}

}  // namespace
}  // namespace dtrain::kv
