// Checks of what a PushPull request says about itself, before the shard store sees
// it: everything that needs only the request (and the size of its payload), so a
// fuzz target can call them without a server. What needs the store (the key exists,
// worker_rank < num_workers, the payload fits the key) is the store's to check.
//
// A compressed push (PushPullRequest.compression) is checked here for its codec and
// threshold; the exact length of its data, which follows from the key's element count,
// is checked where it is unpacked (push_pull_handler.cc).
//
// Every failure is INVALID_ARGUMENT naming the request and the field, e.g.
// "push of key 3 by worker 0: step -1 is negative".
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "dtrain/v1/parameter_server.pb.h"

namespace dtrain::kv {

struct RequestLimits {
  // The most payload a request may carry: the server's gRPC receive limit.
  int64_t max_payload_bytes = int64_t{64} << 20;
  // The longest wait a request may ask for (timeout_ms): a day.
  int64_t max_timeout_ms = int64_t{24} * 3600 * 1000;
};

// `payload_bytes`: the size of `data` as the codec read it (-1: none).
absl::Status ValidatePushPullRequest(const v1::PushPullRequest& req, int64_t payload_bytes,
                                     const RequestLimits& limits = {});

// What the request is, for error messages: "push of key 3 by worker 0".
std::string DescribeRequest(const v1::PushPullRequest& req);

}  // namespace dtrain::kv
