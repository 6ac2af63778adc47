#include "services/launcher/tf_cluster_spec.h"

#include <cmath>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/net_address.h"

namespace dtrain::launcher {
namespace {

// One list of the spec: where it came from ("--ps_hosts", "cluster.worker") and
// what each entry is called in messages ("ps", "worker", "chief").
struct NamedList {
  std::string origin;
  std::string task_prefix;
  std::vector<std::string> hosts;
};

// "h:1" checked and written back the one way dtrain writes addresses, so that copies of
// a spec that differ only in spelling ("[::1]:1" both ways) compare equal.
absl::StatusOr<std::string> CanonicalHost(absl::string_view origin, size_t index, absl::string_view text) {
  absl::StatusOr<HostPort> hp = SplitHostPort(text);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, " entry ", index, ": ", hp.status().message()));
  }
  if (hp->port == 0) {
    return absl::InvalidArgumentError(absl::StrCat(origin, " entry ", index, " '", text, "': port 0"));
  }
  return JoinHostPort(hp->host, hp->port);
}

absl::StatusOr<std::vector<std::string>> ParseHostList(absl::string_view origin, absl::string_view text) {
  std::vector<std::string> hosts;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return hosts;
  size_t i = 0;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, " '", text, "': entry ", i, " is empty"));
    }
    absl::StatusOr<std::string> host = CanonicalHost(origin, i, entry);
    if (!host.ok()) return host.status();
    hosts.push_back(*std::move(host));
    ++i;
  }
  return hosts;
}

std::string ListText(const std::vector<std::string>& hosts) { return absl::StrJoin(hosts, ","); }

// No host:port twice in the whole spec: two tasks cannot serve at one address.
absl::Status CheckDistinct(const std::vector<const NamedList*>& lists) {
  std::map<std::string, std::string> seen;  // host:port -> "ps 0"
  for (const NamedList* list : lists) {
    for (size_t i = 0; i < list->hosts.size(); ++i) {
      const std::string name = absl::StrCat(list->task_prefix, " ", i);
      auto [it, fresh] = seen.emplace(list->hosts[i], name);
      if (!fresh) {
        return absl::InvalidArgumentError(absl::StrCat(list->hosts[i], " is listed twice, as ", it->second, " and ",
                                                       name, ": every task needs its own host:port"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckIndex(absl::string_view what, int64_t index, const NamedList& list) {
  if (index >= 0 && index < static_cast<int64_t>(list.hosts.size())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is out of range: ", list.origin, " lists ", list.hosts.size(),
                   list.hosts.size() == 1 ? " host (" : " hosts (", ListText(list.hosts), "), so it must be ",
                   list.hosts.size() == 1 ? "0" : absl::StrCat("0..", list.hosts.size() - 1)));
}

absl::Status CheckSize(const TfClusterLaunch& launch) {
  const size_t bytes = CanonicalClusterSpec(launch.cluster).size();
  if (bytes > kMaxClusterSpecBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cluster spec takes ", bytes, " bytes; at most ", kMaxClusterSpecBytes, " are supported"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> JsonHostList(const nlohmann::json& cluster, const std::string& job) {
  const std::string origin = absl::StrCat("TF_CONFIG cluster.", job);
  const nlohmann::json& list = cluster.at(job);
  if (!list.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, " must be a list of \"host:port\" strings (a map of task index to address is not supported)"));
  }
  std::vector<std::string> hosts;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, " entry ", i, " is not a string: ", list[i].dump()));
    }
    absl::StatusOr<std::string> host = CanonicalHost(origin, i, list[i].get<std::string>());
    if (!host.ok()) return host.status();
    hosts.push_back(*std::move(host));
  }
  return hosts;
}

// TF_CONFIG's cluster lists, each named for messages.
struct TfConfigLists {
  NamedList ps{"TF_CONFIG cluster.ps", "ps", {}};
  NamedList chief{"TF_CONFIG cluster.chief", "chief", {}};
  NamedList worker{"TF_CONFIG cluster.worker", "worker", {}};
};

// Parses TF_CONFIG and checks that it has a "cluster" object.
absl::StatusOr<nlohmann::json> ParseTfConfigJson(absl::string_view json) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG is not JSON: ", e.what()));
  }
  if (!config.is_object() || !config.contains("cluster") || !config["cluster"].is_object()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG needs \"cluster\": {\"ps\": [\"host:port\", ...], \"worker\": [...]} (and \"task\")");
  }
  return config;
}

// Reads TF_CONFIG's "cluster" into `lists` (an evaluator only adds a note to `launch`),
// then checks that the job has servers and a worker, each address listed once.
absl::Status ReadTfConfigCluster(const nlohmann::json& cluster, TfConfigLists* lists, TfClusterLaunch* launch) {
  NamedList& chief = lists->chief;
  std::string chief_key;  // "chief", or "master" (its name before TF 1.x's Estimator renamed it)
  for (auto it = cluster.begin(); it != cluster.end(); ++it) {
    const std::string& job = it.key();
    absl::StatusOr<std::vector<std::string>> hosts = JsonHostList(cluster, job);
    if (!hosts.ok()) return hosts.status();
    if (job == "ps") {
      lists->ps.hosts = *std::move(hosts);
    } else if (job == "worker") {
      lists->worker.hosts = *std::move(hosts);
    } else if (job == "chief" || job == "master") {
      if (!chief_key.empty()) {
        return absl::InvalidArgumentError("TF_CONFIG lists both cluster.chief and cluster.master; keep one");
      }
      chief_key = job;
      chief.origin = absl::StrCat("TF_CONFIG cluster.", job);
      chief.task_prefix = job;
      chief.hosts = *std::move(hosts);
      if (chief.hosts.size() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(chief.origin, " lists ", chief.hosts.size(), " hosts; a job has one ", job));
      }
    } else if (job == "evaluator") {
      launch->notes.push_back(
          absl::StrCat("TF_CONFIG cluster.evaluator (", ListText(*hosts),
                       ") is ignored: dtrain has no evaluator task, the workers validate at each epoch's end"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG cluster.", job,
                                                     ": unknown job; dtrain knows ps, worker, chief (or master) "
                                                     "and evaluator (ignored)"));
    }
  }
  if (lists->ps.hosts.empty()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG cluster.ps is missing or empty: dtrain trains with parameter servers, list at least one");
  }
  if (lists->worker.hosts.empty() && chief.hosts.empty()) {
    return absl::InvalidArgumentError("TF_CONFIG cluster lists no worker and no chief");
  }
  return CheckDistinct({&lists->ps, &chief, &lists->worker});
}

// Reads TF_CONFIG's "task" and sets this task's role and rank in `launch` (the chief,
// when there is one, is worker rank 0).
absl::Status ReadTfConfigTask(const nlohmann::json& config, const TfConfigLists& lists, TfClusterLaunch* launch) {
  if (!config.contains("task") || !config["task"].is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG needs \"task\": {\"type\": \"worker\", \"index\": N}");
  }
  const nlohmann::json& task = config["task"];
  if (!task.contains("type") || !task["type"].is_string()) {
    return absl::InvalidArgumentError("TF_CONFIG task.type is missing (ps, worker or chief)");
  }
  const std::string type = task["type"].get<std::string>();
  int64_t index = 0;  // TF's default
  if (task.contains("index")) {
    const nlohmann::json& i = task["index"];
    if (!i.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG task.index must be an integer, got ", i.dump()));
    }
    index = i.get<int64_t>();
  }
  const std::string what = absl::StrCat("TF_CONFIG task.index ", index, " (task.type ", type, ")");
  launch->task_text = absl::StrCat("TF_CONFIG task ", type, " ", index);
  launch->task_name = absl::StrCat(type, " ", index);
  launch->has_chief = !lists.chief.hosts.empty();
  if (type == "ps") {
    if (absl::Status s = CheckIndex(what, index, lists.ps); !s.ok()) return s;
    launch->role = Role::kServer;
    launch->rank = static_cast<int>(index);
  } else if (type == "worker") {
    if (absl::Status s = CheckIndex(what, index, lists.worker); !s.ok()) return s;
    launch->role = Role::kWorker;
    launch->rank = static_cast<int>(index) + (launch->has_chief ? 1 : 0);
  } else if (type == "chief" || type == "master") {
    if (lists.chief.hosts.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG task.type is ", type, " but cluster has no ", type));
    }
    if (absl::Status s = CheckIndex(what, index, lists.chief); !s.ok()) return s;
    launch->role = Role::kWorker;
    launch->rank = 0;
  } else if (type == "evaluator") {
    return absl::InvalidArgumentError(
        "TF_CONFIG task.type is evaluator: dtrain has no evaluator task (its workers validate at each epoch's "
        "end); do not start this one");
  } else {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG task.type '", type, "': expected ps, worker or chief"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string TfClusterLaunch::NameOf(Role r, int i) const {
  if (r == Role::kServer) return absl::StrCat("ps ", i);
  if (has_chief) return i == 0 ? "chief 0" : absl::StrCat("worker ", i - 1);
  return absl::StrCat("worker ", i);
}

absl::StatusOr<TfClusterLaunch> FromTfFlags(const TfFlags& flags) {
  NamedList ps{"--ps_hosts", "ps", {}};
  NamedList worker{"--worker_hosts", "worker", {}};
  for (NamedList* list : {&ps, &worker}) {
    absl::StatusOr<std::vector<std::string>> hosts =
        ParseHostList(list->origin, list == &ps ? flags.ps_hosts : flags.worker_hosts);
    if (!hosts.ok()) return hosts.status();
    list->hosts = *std::move(hosts);
  }
  if (ps.hosts.empty()) {
    return absl::InvalidArgumentError(
        "--ps_hosts is empty: dtrain trains with parameter servers, list at least one (host:port)");
  }
  if (worker.hosts.empty()) return absl::InvalidArgumentError("--worker_hosts is empty: list at least one (host:port)");
  if (absl::Status s = CheckDistinct({&ps, &worker}); !s.ok()) return s;
  TfClusterLaunch launch;
  launch.source = "--ps_hosts/--worker_hosts";
  const std::string job = absl::AsciiStrToLower(flags.job_name);
  if (job.empty()) return absl::InvalidArgumentError("--job_name is required: ps or worker");
  if (job != "ps" && job != "worker") {
    return absl::InvalidArgumentError(
        absl::StrCat("--job_name '", flags.job_name, "': expected ps or worker (as in --ps_hosts, --worker_hosts)"));
  }
  if (flags.task_index < 0 && flags.task_index != -1) {
    return absl::InvalidArgumentError(absl::StrCat("--task_index=", flags.task_index, " is negative"));
  }
  if (flags.task_index == -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task_index is required: this task's position in --", job, "_hosts"));
  }
  const NamedList& mine = job == "ps" ? ps : worker;
  if (absl::Status s = CheckIndex(absl::StrCat("--task_index=", flags.task_index), flags.task_index, mine); !s.ok()) {
    return s;
  }
  launch.cluster.ps = ps.hosts;
  launch.cluster.worker = worker.hosts;
  launch.role = job == "ps" ? Role::kServer : Role::kWorker;
  launch.rank = static_cast<int>(flags.task_index);
  launch.task_text = absl::StrCat("--job_name=", job, " --task_index=", flags.task_index);
  launch.task_name = absl::StrCat(job, " ", flags.task_index);
  if (absl::Status s = CheckSize(launch); !s.ok()) return s;
  return launch;
}

absl::StatusOr<TfClusterLaunch> FromTfConfig(absl::string_view json) {
  absl::StatusOr<nlohmann::json> config = ParseTfConfigJson(json);
  if (!config.ok()) return config.status();
  TfClusterLaunch launch;
  launch.source = "TF_CONFIG";
  TfConfigLists lists;
  if (absl::Status s = ReadTfConfigCluster((*config)["cluster"], &lists, &launch); !s.ok()) return s;
  if (absl::Status s = ReadTfConfigTask(*config, lists, &launch); !s.ok()) return s;
  launch.cluster.ps = lists.ps.hosts;
  launch.cluster.worker = lists.chief.hosts;
  launch.cluster.worker.insert(launch.cluster.worker.end(), lists.worker.hosts.begin(), lists.worker.hosts.end());
  if (absl::Status s = CheckSize(launch); !s.ok()) return s;
  return launch;
}

std::string SchedulerAddressOf(const ClusterSpec& cluster, int scheduler_port) {
  if (scheduler_port == 0) return cluster.worker.at(0);
  absl::StatusOr<HostPort> hp = SplitHostPort(cluster.worker.at(0));  // checked when parsed
  return JoinHostPort(hp.ok() ? hp->host : cluster.worker[0], scheduler_port);
}

}  // namespace dtrain::launcher
