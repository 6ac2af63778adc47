#include "services/inference/rpc_context.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dtrain::inference {

absl::Time DeadlineOf(const grpc::ServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

absl::Status StillWanted(const grpc::ServerContext& ctx, absl::Time deadline, const char* before) {
  if (ctx.IsCancelled()) return absl::CancelledError(absl::StrCat("cancelled by the client before ", before));
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat("deadline passed before ", before));
  }
  return absl::OkStatus();
}

bool CallCounter::Drain(absl::Duration timeout) const {
  const absl::Time give_up = absl::Now() + timeout;
  while (running_.load() > 0) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const LoadedModel>> ServingModel(const ModelHolder& holder, const std::string& prefix) {
  std::shared_ptr<const LoadedModel> model = holder.Get();
  if (model == nullptr) {
    return absl::UnavailableError(absl::StrCat("no model loaded yet: waiting for a checkpoint ",
                                               WithoutDirectory(prefix, DirectoryOf(prefix)), "-NNNN.params"));
  }
  return model;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string WithoutDirectory(const std::string& path, const std::string& dir) {
  if (!dir.empty() && absl::StartsWith(path, dir)) return path.substr(dir.size());
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace dtrain::inference
