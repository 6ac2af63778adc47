#include "common/cluster_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dtrain {
namespace {

// Past this a list is not printed whole: a message names its first entry that differs.
constexpr size_t kMaxListText = 160;

std::string ListText(const std::vector<std::string>& list) {
  return list.empty() ? std::string("empty") : absl::StrJoin(list, ",");
}

// "X's --ps_hosts is a:1 but Y's is a:2", or "" when the lists agree.
std::string DescribeList(absl::string_view flag, const std::vector<std::string>& mine, absl::string_view mine_owner,
                         const std::vector<std::string>& theirs, absl::string_view theirs_owner) {
  if (mine == theirs) return "";
  const std::string mine_text = ListText(mine);
  const std::string theirs_text = ListText(theirs);
  if (mine_text.size() <= kMaxListText && theirs_text.size() <= kMaxListText) {
    return absl::StrCat(mine_owner, " ", flag, " is ", mine_text, " but ", theirs_owner, " is ", theirs_text);
  }
  size_t i = 0;
  while (i < mine.size() && i < theirs.size() && mine[i] == theirs[i]) ++i;
  auto entry = [i](const std::vector<std::string>& list) {
    return i < list.size() ? absl::StrCat("entry ", i, " is ", list[i]) : absl::StrCat("no entry ", i);
  };
  return absl::StrCat(mine_owner, " ", flag, " lists ", mine.size(), " hosts and ", entry(mine), ", but ", theirs_owner,
                      " lists ", theirs.size(), " and ", entry(theirs));
}

}  // namespace

std::string CanonicalClusterSpec(const ClusterSpec& spec) {
  return absl::StrCat("ps=", absl::StrJoin(spec.ps, ","), ";worker=", absl::StrJoin(spec.worker, ","));
}

absl::StatusOr<ClusterSpec> ParseCanonicalClusterSpec(absl::string_view text) {
  if (text.size() > kMaxClusterSpecBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec has ", text.size(), " bytes, the limit is ", kMaxClusterSpecBytes));
  }
  ClusterSpec spec;
  bool seen_ps = false;
  bool seen_worker = false;
  for (absl::string_view part : absl::StrSplit(text, ';')) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("cluster spec '", text, "': '", part, "' is not NAME=LIST"));
    }
    const absl::string_view name = part.substr(0, eq);
    std::vector<std::string>* list = nullptr;
    if (name == "ps" && !seen_ps) {
      list = &spec.ps;
      seen_ps = true;
    } else if (name == "worker" && !seen_worker) {
      list = &spec.worker;
      seen_worker = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster spec '", text, "': unexpected or repeated list '", name, "'"));
    }
    const absl::string_view entries = part.substr(eq + 1);
    if (entries.empty()) continue;
    for (absl::string_view e : absl::StrSplit(entries, ',')) {
      if (e.empty()) return absl::InvalidArgumentError(absl::StrCat("cluster spec '", text, "': an empty entry"));
      list->emplace_back(e);
    }
  }
  if (!seen_ps || !seen_worker) {
    return absl::InvalidArgumentError(absl::StrCat("cluster spec '", text, "': want ps=...;worker=..."));
  }
  return spec;
}

std::string DescribeClusterSpecDifference(const ClusterSpec& mine, absl::string_view mine_owner,
                                          const ClusterSpec& theirs, absl::string_view theirs_owner) {
  std::vector<std::string> parts;
  for (std::string d : {DescribeList("--ps_hosts", mine.ps, mine_owner, theirs.ps, theirs_owner),
                        DescribeList("--worker_hosts", mine.worker, mine_owner, theirs.worker, theirs_owner)}) {
    if (!d.empty()) parts.push_back(std::move(d));
  }
  return absl::StrJoin(parts, "; ");
}

absl::Status CompareClusterSpecs(absl::string_view scheduler_text, absl::string_view node_text,
                                 absl::string_view node_name) {
  if (scheduler_text.empty() || node_text.empty() || scheduler_text == node_text) return absl::OkStatus();
  absl::StatusOr<ClusterSpec> node = ParseCanonicalClusterSpec(node_text);
  if (!node.ok()) return absl::InvalidArgumentError(absl::StrCat(node_name, ": ", node.status().message()));
  // The scheduler checked its own at start-up; a failure here is a bug, but still a refusal.
  absl::StatusOr<ClusterSpec> scheduler = ParseCanonicalClusterSpec(scheduler_text);
  if (!scheduler.ok()) return absl::InternalError(absl::StrCat("the scheduler's ", scheduler.status().message()));
  std::string diff =
      DescribeClusterSpecDifference(*node, absl::StrCat(node_name, "'s"), *scheduler, "the scheduler's (worker 0's)");
  // Texts that differ but parse the same (cannot happen with dtrain run's texts).
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cluster spec mismatch: ", diff, "; every node must be started with the same --ps_hosts and --worker_hosts"));
}

}  // namespace dtrain
