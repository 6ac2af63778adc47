// What both inference services (dtrain.v1.Inference and the Open Inference Protocol's
// GRPCInferenceService) do alike with a call: read its deadline, check it is still
// wanted before costly work, count it while it runs (so shutdown can drain), and find
// the model now serving.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/inference/model_holder.h"

namespace dtrain::inference {

// The call's deadline; InfiniteFuture when the client set none.
absl::Time DeadlineOf(const grpc::ServerContext& ctx);

// CANCELLED or DEADLINE_EXCEEDED ("... before `before`") when the caller no longer
// wants the answer.
absl::Status StillWanted(const grpc::ServerContext& ctx, absl::Time deadline, const char* before);

// Calls running now, across every service that shares one counter.
class CallCounter {
 public:
  // Counts a call for its whole scope.
  class Scope {
   public:
    explicit Scope(std::atomic<int>* count) : count_(count) { count_->fetch_add(1); }
    ~Scope() { count_->fetch_sub(1); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::atomic<int>* count_;
  };

  Scope Enter() { return Scope(&running_); }

  // Waits up to `timeout` for the running calls to finish; false if some still run.
  // grpc::Server::Shutdown(deadline) also waits for idle client connections to go
  // away, so main drains with this first and then shuts down without a grace period.
  bool Drain(absl::Duration timeout) const;

 private:
  std::atomic<int> running_{0};
};

// The serving model, or UNAVAILABLE (retry later) before the first load, naming the
// checkpoint file awaited (its name only: `prefix`'s directories are not shown).
absl::StatusOr<std::shared_ptr<const LoadedModel>> ServingModel(const ModelHolder& holder, const std::string& prefix);

// "a/b/model-0001.params" -> "a/b/" (with the slash; "" when there is none).
std::string DirectoryOf(const std::string& path);
// `path` without `dir` in front, or else without any directory.
std::string WithoutDirectory(const std::string& path, const std::string& dir);

}  // namespace dtrain::inference
