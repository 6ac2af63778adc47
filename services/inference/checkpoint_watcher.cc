#include "services/inference/checkpoint_watcher.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/checkpoint/checkpoint.h"

namespace dtrain::inference {
namespace {

// Identifies one version of a file: a rename over it changes the inode, an in-place
// rewrite the size or mtime. All zero when the file is absent.
struct FileVersion {
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion& o) const {
    return std::tie(inode, size, mtime_ns) == std::tie(o.inode, o.size, o.mtime_ns);
  }
};

FileVersion VersionOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::string DirOf(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : prefix.substr(0, slash);
}

std::string BaseOf(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  return slash == std::string::npos ? prefix : prefix.substr(slash + 1);
}

std::string RefusalText(int epoch, const absl::Status& why) {
  return absl::StrCat("epoch ", epoch, " refused: ", why.message());
}

}  // namespace

struct CheckpointWatcher::Core {
  WatcherOptions options;
  std::shared_ptr<ModelHolder> holder;

  // Serialises Poll (the start-up wait and the thread never load at once).
  absl::Mutex poll_mu;
  struct Refusal {
    FileVersion params, symbol;
    absl::Status why;
  };
  std::map<int, Refusal> refused ABSL_GUARDED_BY(poll_mu);

  absl::Mutex mu;
  bool stop ABSL_GUARDED_BY(mu) = false;
  bool done ABSL_GUARDED_BY(mu) = false;

  absl::StatusOr<bool> Poll();
  void Loop(absl::Duration interval);
};

absl::StatusOr<bool> CheckpointWatcher::Core::Poll() {
  absl::MutexLock lock(&poll_mu);
  const std::string& prefix = options.prefix;
  std::shared_ptr<const LoadedModel> serving = holder->Get();
  const int serving_epoch = serving ? serving->meta().epoch : 0;

  std::vector<int> candidates;
  if (options.pinned_epoch > 0) {
    if (serving) return false;
    if (VersionOf(checkpoint::ParamsPath(prefix, options.pinned_epoch)).inode == 0) {
      return absl::NotFoundError(absl::StrCat("waiting for ", checkpoint::ParamsPath(prefix, options.pinned_epoch),
                                              " (--epoch ", options.pinned_epoch, ")"));
    }
    candidates.push_back(options.pinned_epoch);
  } else {
    absl::StatusOr<std::vector<int>> epochs = checkpoint::ListEpochs(prefix);
    if (!epochs.ok()) {
      if (serving) return false;
      return epochs.status();
    }
    for (int e : *epochs) {
      if (e > serving_epoch) candidates.push_back(e);
    }
    if (candidates.empty() && !serving) {
      return absl::NotFoundError(
          absl::StrCat("no checkpoint ", BaseOf(prefix), "-NNNN.params in ", DirOf(prefix), " yet"));
    }
  }

  absl::Status last_refusal;
  std::string newest_refusal;  // kept as the reload error if an older epoch loads
  const FileVersion symbol = VersionOf(checkpoint::SymbolPath(prefix));
  for (int epoch : candidates) {
    const std::string path = checkpoint::ParamsPath(prefix, epoch);
    const FileVersion params = VersionOf(path);
    auto old = refused.find(epoch);
    if (old != refused.end() && old->second.params == params && old->second.symbol == symbol) {
      last_refusal = old->second.why;  // unchanged since it was refused and logged
      if (newest_refusal.empty()) newest_refusal = RefusalText(epoch, last_refusal);
      continue;
    }
    absl::StatusOr<std::shared_ptr<const LoadedModel>> model = LoadedModel::Load(prefix, epoch);
    if (model.ok()) {
      holder->Set(*std::move(model));
      if (!newest_refusal.empty()) holder->SetReloadError(newest_refusal);
      refused.erase(refused.begin(), refused.upper_bound(epoch));
      DTRAIN_LOG(INFO) << "serving " << path << " (" << holder->Get()->meta().network << ")"
                       << (serving ? absl::StrCat(", replacing epoch ", serving_epoch) : "");
      if (options.on_loaded) options.on_loaded(epoch);
      return true;
    }
    refused[epoch] = {params, symbol, model.status()};
    last_refusal = model.status();
    const std::string what =
        serving ? absl::StrCat("still serving epoch ", serving_epoch) : std::string("no model serving yet");
    DTRAIN_LOG(ERROR) << "refusing checkpoint epoch " << epoch << ": " << model.status().message() << "; " << what;
    if (newest_refusal.empty()) newest_refusal = RefusalText(epoch, last_refusal);
    holder->SetReloadError(newest_refusal);
  }
  if (serving) return false;
  return last_refusal;
}

void CheckpointWatcher::Core::Loop(absl::Duration interval) {
  for (;;) {
    {
      absl::MutexLock lock(&mu);
      const absl::Time wake = absl::Now() + interval;
      mu.AwaitWithDeadline(absl::Condition(&stop), wake);
      if (stop) break;
    }
    // Errors were logged by Poll; before the first model they are main's to report.
    (void)Poll();
  }
  absl::MutexLock lock(&mu);
  done = true;
}

CheckpointWatcher::CheckpointWatcher(WatcherOptions options, std::shared_ptr<ModelHolder> holder)
    : core_(std::make_shared<Core>()) {
  core_->options = std::move(options);
  core_->holder = std::move(holder);
}

CheckpointWatcher::~CheckpointWatcher() { Stop(absl::Seconds(2)); }

absl::StatusOr<bool> CheckpointWatcher::Poll() { return core_->Poll(); }

void CheckpointWatcher::Start(absl::Duration interval) {
  if (thread_.joinable()) return;
  thread_ = std::thread([core = core_, interval] { core->Loop(interval); });
}

bool CheckpointWatcher::Stop(absl::Duration timeout) {
  if (!thread_.joinable()) return true;
  bool finished;
  {
    absl::MutexLock lock(&core_->mu);
    core_->stop = true;
    finished = core_->mu.AwaitWithTimeout(absl::Condition(&core_->done), timeout);
  }
  if (finished) {
    thread_.join();
  } else {
    DTRAIN_LOG(WARNING) << "checkpoint watcher still loading after " << timeout << "; leaving it behind";
    thread_.detach();
  }
  return finished;
}

}  // namespace dtrain::inference
