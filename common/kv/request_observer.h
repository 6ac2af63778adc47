// What a PushPullHandler (push_pull_handler.h) reports about the requests it handles:
// counts and bytes. A parameter server feeds them into its Prometheus metrics
// (services/server/server_metrics.h); the in-process `local` kvstore reports nothing.
// Every method may be called from any thread, some with a key's lock held: keep them
// cheap and never call back into the store.
#pragma once

#include <cstdint>

namespace dtrain::kv {

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;

  // A push (or a push-pull's push) arrived carrying `bytes` of data as sent.
  virtual void PushReceived(int64_t bytes) = 0;
  // The push's gradient as floats: its bytes uncompressed (= the bytes received unless
  // the push was compressed).
  virtual void PushUnpacked(int64_t bytes) = 0;
  virtual void PullRequested() = 0;
  // A pull answered with `bytes` of data; `weight_bytes`: what the weights are as
  // float32s (more than `bytes` when the answer is a packed change).
  virtual void PullAnswered(int64_t bytes, int64_t weight_bytes) = 0;
  // A request answered with an error (or not answerable at all).
  virtual void RequestFailed() = 0;
};

}  // namespace dtrain::kv
