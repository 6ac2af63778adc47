#include "common/metrics/metrics_csv.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dtrain::metrics {
namespace {

constexpr int kColumns = 9;

absl::Status BadLine(const std::string& path, int line, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", why));
}

}  // namespace

const char* EpochFiguresHeader() {
  return "epoch,samples,time_cost_s,samples_per_sec,train_loss,train_accuracy,validation_accuracy,workers,"
         "unix_time";
}

std::string MetricsCsvPath(const std::string& prefix) { return prefix + "-metrics.csv"; }

absl::Status AppendEpochFigures(const std::string& path, const EpochFigures& r) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::string text;
  if (::lseek(fd, 0, SEEK_END) == 0) absl::StrAppend(&text, EpochFiguresHeader(), "\n");
  absl::StrAppendFormat(&text, "%d,%d,%.3f,%.2f,%.6f,%.6f,%.6f,%d,%d\n", r.epoch, r.samples, r.time_cost_s,
                        r.samples_per_sec, r.train_loss, r.train_accuracy, r.validation_accuracy, r.workers,
                        r.unix_time);
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int write_errno = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("cannot append to ", path, ": ", std::strerror(write_errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EpochFigures>> ReadEpochFigures(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, " (no such file?)"));
  std::string line;
  if (!std::getline(in, line) || absl::StripSuffix(line, "\r") != EpochFiguresHeader()) {
    return BadLine(path, 1, absl::StrCat("expected the header \"", EpochFiguresHeader(), "\""));
  }
  std::map<int64_t, EpochFigures> by_epoch;
  for (int number = 2; std::getline(in, line); ++number) {
    line = std::string(absl::StripSuffix(line, "\r"));
    if (line.empty()) continue;
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    if (static_cast<int>(f.size()) != kColumns) {
      return BadLine(path, number, absl::StrCat("expected ", kColumns, " fields, got ", f.size()));
    }
    EpochFigures r;
    const bool ok = absl::SimpleAtoi(f[0], &r.epoch) && absl::SimpleAtoi(f[1], &r.samples) &&
                    absl::SimpleAtod(f[2], &r.time_cost_s) && absl::SimpleAtod(f[3], &r.samples_per_sec) &&
                    absl::SimpleAtod(f[4], &r.train_loss) && absl::SimpleAtod(f[5], &r.train_accuracy) &&
                    absl::SimpleAtod(f[6], &r.validation_accuracy) && absl::SimpleAtoi(f[7], &r.workers) &&
                    absl::SimpleAtoi(f[8], &r.unix_time);
    if (!ok) return BadLine(path, number, absl::StrCat("malformed row \"", line, "\""));
    by_epoch[r.epoch] = r;
  }
  std::vector<EpochFigures> out;
  for (const auto& entry : by_epoch) out.push_back(entry.second);
  return out;
}

}  // namespace dtrain::metrics
