// What the dtrain-infer integration tests share: a checkpoint trained once per build
// directory, copying checkpoint files the way training writes them, and a real
// dtrain-infer process with gRPC stubs for its services.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "absl/time/time.h"
#include "dtrain/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {

inline constexpr char kDataDir[] = "/usr/share/datasets/fashion-mnist";

// LeNet, 2 epochs on 2000 examples (seconds). Trained on first use and kept in the
// build tree (retrained when dtrain-worker is rebuilt); a file lock lets tests running
// in parallel share it.
struct TrainedCheckpoint {
  std::string prefix;              // DIR/m: m-symbol.json, m-0001.params, m-0002.params
  std::vector<double> validation;  // the trainer's Validation-accuracy per epoch (epoch 1 first)
};
const TrainedCheckpoint& Trained();

// A fresh temporary directory, removed with its contents when the test program exits.
std::string ScratchDir();

// Copies `from` to `to` through a temp file and rename, as the trainer writes.
void InstallFile(const std::string& from, const std::string& to);
// Writes `bytes` to `to` the same way.
void InstallBytes(const std::string& bytes, const std::string& to);
std::string ReadWholeFile(const std::string& path);

class InferProcess {
 public:
  // Starts dtrain-infer with --port-file and `flags`; waits up to 30 s for the port.
  explicit InferProcess(std::vector<std::string> flags);
  ~InferProcess();  // SIGKILL if still running

  bool started() const { return port_ > 0; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  Subprocess& process() { return *process_; }
  v1::Inference::Stub& inference() { return *inference_; }
  // A channel of its own (a connection of its own) to the server, connected before it
  // is returned (a failure is reported, naming the address). A first call that does not
  // wait for ready fails with its channel's first connection attempt, and gRPC 1.51 can
  // fail an attempt that was still in progress: it reads connect()'s errno after other
  // calls (grpc/grpc#35064), e.g. "No such file or directory".
  std::shared_ptr<grpc::Channel> Connect(absl::Duration timeout = absl::Seconds(30));

  // The health service's answer for `service` ("" = the whole server), or -1 if the
  // call failed.
  int Health(const std::string& service = "");
  // Polls Health until it is `status` or `timeout` passes.
  bool WaitForHealth(int status, absl::Duration timeout);
  // SIGTERM, then the exit code (-1 if it did not exit within `timeout`).
  int Stop(absl::Duration timeout = absl::Seconds(10));

 private:
  std::unique_ptr<Subprocess> process_;
  int port_ = 0;
  std::unique_ptr<v1::Inference::Stub> inference_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// A Predict request for the first `count` t10k images as uint8 [count, 28, 28].
v1::PredictRequest T10kRequest(int count, int top_k = 1);

}  // namespace dtrain::testing
