#include "common/checkpoint/checkpoint_set.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/safetensors.h"
#include "common/log.h"

namespace dtrain::checkpoint {
namespace {

struct Split {
  std::string dir;
  std::string base;  // the prefix's last component
  // The path of `name` beside the prefix, spelled as the prefix is.
  std::string Path(const std::string& name) const {
    if (dir == ".") return name;
    return dir == "/" ? "/" + name : dir + "/" + name;
  }
};

Split SplitPrefix(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  if (slash == std::string::npos) return {".", prefix};
  return {slash == 0 ? "/" : prefix.substr(0, slash), prefix.substr(slash + 1)};
}

// The directory's entry names; an absent directory has none.
absl::StatusOr<std::vector<std::string>> Names(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return std::vector<std::string>{};
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::vector<std::string> names;
  for (; it != end; it.increment(ec)) {
    if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
    names.push_back(it->path().filename().string());
  }
  return names;
}

bool ProcessGone(int64_t pid) {
  return pid > 0 && pid <= INT32_MAX && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

absl::StatusOr<std::vector<CheckpointFile>> ListCheckpointFiles(const std::string& prefix) {
  const Split p = SplitPrefix(prefix);
  absl::StatusOr<std::vector<std::string>> names = Names(p.dir);
  if (!names.ok()) return absl::NotFoundError(absl::StrCat("checkpoints of ", prefix, ": ", names.status().message()));
  const std::string head = p.base + "-";
  std::vector<CheckpointFile> files;
  for (const std::string& name : *names) {
    if (name.size() <= head.size() || name.compare(0, head.size(), head) != 0) continue;
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos || dot <= head.size()) continue;
    const std::string digits = name.substr(head.size(), dot - head.size());
    int epoch = 0;
    if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        !absl::SimpleAtoi(digits, &epoch) || epoch <= 0) {
      continue;
    }
    // Only names the writers produce: "-00001.params" is not epoch 1's file.
    if (name == ParamsPath(p.base, epoch) || name == StatesPath(p.base, epoch) ||
        name == SafetensorsPath(p.base, epoch)) {
      files.push_back({epoch, p.Path(name)});
    }
  }
  std::sort(files.begin(), files.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.epoch != b.epoch ? a.epoch < b.epoch : a.path < b.path;
  });
  return files;
}

absl::StatusOr<std::vector<std::string>> SweepStaleTempFiles(const std::string& prefix) {
  const Split p = SplitPrefix(prefix);
  absl::StatusOr<std::vector<std::string>> names = Names(p.dir);
  if (!names.ok()) return absl::NotFoundError(absl::StrCat("checkpoints of ", prefix, ": ", names.status().message()));
  const std::string head = p.base + "-";
  constexpr std::string_view kTmp = ".tmp.";
  std::vector<std::string> removed;
  for (const std::string& name : *names) {
    if (name.compare(0, head.size(), head) != 0) continue;
    const size_t at = name.rfind(kTmp);
    if (at == std::string::npos) continue;
    int64_t pid = 0;
    if (!absl::SimpleAtoi(name.substr(at + kTmp.size()), &pid) || !ProcessGone(pid)) continue;
    const std::string path = p.Path(name);
    std::error_code ec;
    if (std::filesystem::remove(path, ec)) {
      removed.push_back(path);
    } else if (ec) {
      DTRAIN_LOG(WARNING) << "cannot remove stale temp file " << path << ": " << ec.message();
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace dtrain::checkpoint
