// A PushPull stream's answers waiting for the one write in flight, ordered for the
// worker's next forward: the lowest key first. Keys are
// param_index << 24 | chunk (common/kv/placement.h), so that is the first layer first,
// which is the order a worker waits for weights in with --overlap. A stream only holds
// answers while the link is slower than the server (flow control), so with a fast link
// this is FIFO in effect. Answers of one key keep their order. In dist_sync a worker's
// stream holds one step's answers at most (it pushes step t+1 of a key only after
// getting step t's), and in dist_async one answer per key, so no key waits forever.
// Not thread-safe: the stream's outbox lock guards it.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include <grpcpp/support/byte_buffer.h>

namespace dtrain::server {

class AnswerQueue {
 public:
  void Push(uint64_t key, grpc::ByteBuffer answer) {
    bytes_ += static_cast<int64_t>(answer.Length());
    queue_.emplace(std::make_pair(key, next_++), std::move(answer));
  }
  // The lowest key's oldest answer. Not empty() required.
  grpc::ByteBuffer Pop() {
    auto it = queue_.begin();
    grpc::ByteBuffer answer = std::move(it->second);
    queue_.erase(it);
    bytes_ -= static_cast<int64_t>(answer.Length());
    return answer;
  }
  // The size of what Pop would return next. Not empty() required.
  size_t FrontLength() { return queue_.begin()->second.Length(); }
  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  int64_t bytes() const { return bytes_; }
  void clear() {
    queue_.clear();
    bytes_ = 0;
  }

 private:
  std::map<std::pair<uint64_t, uint64_t>, grpc::ByteBuffer> queue_;  // (key, arrival) -> answer
  uint64_t next_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace dtrain::server
