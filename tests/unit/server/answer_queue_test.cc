// AnswerQueue: a stream's waiting answers go out lowest key (first layer) first, one
// key's answers in their order, and the byte count follows what is queued.
#include "services/server/answer_queue.h"

#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "gtest/gtest.h"

namespace dtrain::server {
namespace {

grpc::ByteBuffer Buffer(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Text(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

constexpr uint64_t Key(uint64_t param, uint64_t chunk) { return param << 24 | chunk; }

TEST(AnswerQueueTest, FirstLayerFirstAndOneKeysAnswersInOrder) {
  AnswerQueue q;
  EXPECT_TRUE(q.empty());
  // As a step's answers become ready: the last layers merge first in backward order.
  q.Push(Key(3, 0), Buffer("fc2"));
  q.Push(Key(2, 1), Buffer("fc1 chunk 1"));
  q.Push(Key(2, 0), Buffer("fc1 chunk 0"));
  q.Push(Key(0, 0), Buffer("conv1 version"));
  q.Push(Key(0, 0), Buffer("conv1 weights"));
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.bytes(), 3 + 11 + 11 + 13 + 13);
  std::vector<std::string> order;
  while (!q.empty()) order.push_back(Text(q.Pop()));
  EXPECT_EQ(order, (std::vector<std::string>{"conv1 version", "conv1 weights", "fc1 chunk 0", "fc1 chunk 1", "fc2"}));
  EXPECT_EQ(q.bytes(), 0);
}

TEST(AnswerQueueTest, ALowerKeyArrivingLaterOvertakesWhatIsStillQueued) {
  AnswerQueue q;
  q.Push(Key(5, 0), Buffer("a"));
  q.Push(Key(5, 1), Buffer("b"));
  EXPECT_EQ(Text(q.Pop()), "a");  // written meanwhile
  q.Push(Key(1, 0), Buffer("c"));
  EXPECT_EQ(Text(q.Pop()), "c");
  EXPECT_EQ(Text(q.Pop()), "b");
  q.Push(Key(1, 0), Buffer("d"));
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0);
}

}  // namespace
}  // namespace dtrain::server
