#include "services/launcher/launch_elastic.h"

#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/elastic/membership_file.h"
#include "common/elastic/membership_schedule.h"
#include "common/status_macros.h"

namespace dtrain::launcher {
namespace {

// What a joining worker must agree on with the job (the scheduler refuses a node that
// says otherwise), where to find it, and the thread share the launched workers run with
// (DTRAIN_LOCAL_WORKERS: the same --threads 0 share as theirs); not the launcher's
// per-child settings (ranks, ports, log prefixes, metrics and certificate files).
constexpr const char* kJoinEnv[] = {"DTRAIN_SCHEDULER_ADDR", "DTRAIN_NUM_WORKERS",   "DTRAIN_NUM_SERVERS",
                                    "DTRAIN_REPLICATION",    "DTRAIN_JOB_ID",        "DTRAIN_ELASTIC",
                                    "DTRAIN_REJOIN_TIMEOUT", "DTRAIN_LOCAL_WORKERS", "DTRAIN_NODE_HOST"};

// `text` as one shell word.
std::string ShellWord(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./:=,+@%") == std::string::npos) {
    return text;
  }
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string Bounds(const elastic::ElasticSpec& spec) { return absl::StrCat(spec.min_workers, ":", spec.max_workers); }

// The recording must be of a job like this one: its bounds, and generation 0 the -n
// workers the job starts with (the scheduler checks the same once it runs; here the
// mistake is named before anything starts).
absl::Status CheckReplay(const elastic::ElasticSpec& spec, int64_t num_workers) {
  absl::StatusOr<elastic::MembershipSchedule> replay = elastic::ReadMembershipFile(spec.replay_membership);
  if (!replay.ok()) return absl::InvalidArgumentError(absl::StrCat("--replay-membership: ", replay.status().message()));
  const std::string where = absl::StrCat("--replay-membership ", spec.replay_membership, ": ");
  if (replay->min_workers() != spec.min_workers || replay->max_workers() != spec.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat(where, "the recorded job was --elastic ", replay->min_workers(), ":",
                                                   replay->max_workers(), ", this one is --elastic ", Bounds(spec)));
  }
  std::vector<int> first(static_cast<size_t>(num_workers));
  std::iota(first.begin(), first.end(), 0);
  const elastic::Generation& start = replay->generations().front();
  if (start.ranks != first) {
    return absl::InvalidArgumentError(absl::StrCat(where, "the recorded job started with workers ",
                                                   elastic::RankSetText(start.ranks), ", this one with -n ",
                                                   num_workers, " (workers ", elastic::RankSetText(first), ")"));
  }
  return absl::OkStatus();
}

// The value of worker flag `name` ("--load-epoch 3" or "--load-epoch=3"; the last one
// given), or "" when absent.
std::string WorkerFlag(const std::vector<std::string>& args, const std::string& name) {
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) value = args[i + 1];
    if (absl::StartsWith(args[i], name + "=")) value = args[i].substr(name.size() + 1);
  }
  return value;
}

}  // namespace

absl::Status ResolveElasticResume(const std::vector<std::string>& worker_args, int64_t num_workers,
                                  LaunchElastic* settings) {
  elastic::ElasticSpec& spec = settings->spec;
  const std::string load_epoch = WorkerFlag(worker_args, "--load-epoch");
  int64_t epoch = 0;
  if (!spec.enabled() || load_epoch.empty() || !absl::SimpleAtoi(load_epoch, &epoch) || epoch <= 0) {
    return absl::OkStatus();  // a fresh start (a bad --load-epoch is the worker's to refuse)
  }
  const std::string prefix = WorkerFlag(worker_args, "--model-prefix");
  if (prefix.empty()) return absl::OkStatus();  // the worker refuses --load-epoch without it
  spec.resume_membership = elastic::CheckpointMembershipPath(prefix, static_cast<int>(epoch));
  absl::StatusOr<elastic::MembershipSchedule> saved = elastic::ReadMembershipFile(spec.resume_membership);
  if (!saved.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--load-epoch ", epoch,
        " with --elastic resumes with the membership saved with the checkpoint: ", saved.status().message()));
  }
  const int64_t k = static_cast<int64_t>(saved->latest().ranks.size());
  if (k != num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.resume_membership, ": checkpoint ", epoch, " resumes with ", k, " workers (",
                     saved->Describe(static_cast<int>(saved->generations().size()) - 1), "), not -n ", num_workers,
                     ": start it with -n ", k, "; workers may join once it runs"));
  }
  return absl::OkStatus();
}

void AddLaunchElasticFlags(FlagSet& flags, LaunchElastic* settings) {
  elastic::ElasticSpec* spec = &settings->spec;
  flags.AddParsed(
      "elastic",
      [spec](const std::string& text) -> absl::Status {
        DTRAIN_ASSIGN_OR_RETURN(const elastic::ElasticSpec bounds, elastic::ParseElasticBounds(text));
        spec->min_workers = bounds.min_workers;
        spec->max_workers = bounds.max_workers;
        return absl::OkStatus();
      },
      "",
      "MIN:MAX: workers may join and leave while the job runs, between MIN and MAX (-n within them; dist_sync). "
      "Every process is told DTRAIN_ELASTIC=MIN:MAX (docs/elastic.md)");
  flags.AddParsed(
      "elastic-lr",
      [settings](const std::string& text) -> absl::Status {
        DTRAIN_ASSIGN_OR_RETURN(settings->spec.lr, elastic::ParseElasticLr(text));
        settings->lr_given = true;
        return absl::OkStatus();
      },
      std::string(elastic::ElasticLrName(spec->lr)),
      "with --elastic: 'scale' multiplies the lr by (workers now) / -n, 'keep' leaves it (the scheduler's "
      "flag)");
  flags.AddString("replay-membership", &spec->replay_membership,
                  "with --elastic: a recorded PREFIX-membership.json; the scheduler holds each join and leave until "
                  "its recorded step, so the run ends on the recorded run's weights");
}

absl::Status CheckLaunchElastic(const LaunchElastic& settings, int64_t num_workers, KVStoreMode mode) {
  const elastic::ElasticSpec& spec = settings.spec;
  // CheckElasticSpec sees a non-default lr only: "--elastic-lr keep" without --elastic
  // is its refusal, "--elastic-lr scale" alone would pass it silently.
  if (!spec.enabled() && settings.lr_given) return absl::InvalidArgumentError("--elastic-lr needs --elastic MIN:MAX");
  DTRAIN_RETURN_IF_ERROR(elastic::CheckElasticSpec(spec, num_workers, mode));
  if (spec.enabled() && !spec.replay_membership.empty()) return CheckReplay(spec, num_workers);
  return absl::OkStatus();
}

std::pair<std::string, std::string> ElasticEnv(const elastic::ElasticSpec& spec) {
  return {"DTRAIN_ELASTIC", spec.enabled() ? Bounds(spec) : ""};
}

std::vector<std::string> SchedulerElasticArgs(const LaunchElastic& settings) {
  std::vector<std::string> args;
  if (!settings.spec.enabled()) return args;
  if (settings.lr_given) {
    args.insert(args.end(), {"--elastic-lr", std::string(elastic::ElasticLrName(settings.spec.lr))});
  }
  if (!settings.spec.replay_membership.empty()) {
    args.insert(args.end(), {"--replay-membership", settings.spec.replay_membership});
  }
  if (!settings.spec.resume_membership.empty()) {
    args.insert(args.end(), {"--resume-membership", settings.spec.resume_membership});
  }
  return args;
}

std::string ElasticSummary(const elastic::ElasticSpec& spec) {
  if (!spec.enabled()) return "";
  return absl::StrCat(", elastic ", Bounds(spec), ": workers may join and leave");
}

std::string JoinCommand(const std::vector<std::pair<std::string, std::string>>& job_env,
                        const std::string& worker_binary, KVStoreMode mode,
                        const std::vector<std::string>& worker_args) {
  std::string command;
  for (const char* name : kJoinEnv) {
    for (const auto& [key, value] : job_env) {
      if (key == name) absl::StrAppend(&command, name, "=", ShellWord(value), " ");
    }
  }
  absl::StrAppend(&command, ShellWord(worker_binary), " --kv-store ", KVStoreModeName(mode));
  for (const std::string& a : worker_args) absl::StrAppend(&command, " ", ShellWord(a));
  return command;
}

std::vector<std::string> JoinInstructions(const elastic::ElasticSpec& spec,
                                          const std::vector<std::pair<std::string, std::string>>& job_env,
                                          const std::string& worker_binary, KVStoreMode mode,
                                          const std::vector<std::string>& worker_args, const std::string& tls_dir) {
  std::vector<std::string> lines;
  if (!spec.enabled()) return lines;
  lines.push_back(
      absl::StrCat("to add a worker while it runs: ", JoinCommand(job_env, worker_binary, mode, worker_args)));
  if (!tls_dir.empty()) {
    const std::string stem = absl::StrCat(ShellWord(tls_dir), "/worker-K");
    lines.push_back(absl::StrCat("with --tls, add for a free rank K below ", spec.max_workers,
                                 ": DTRAIN_RANK=K DTRAIN_TLS_CA=", ShellWord(tls_dir), "/ca.crt DTRAIN_TLS_CERT=", stem,
                                 ".crt DTRAIN_TLS_KEY=", stem, ".key"));
  }
  return lines;
}

}  // namespace dtrain::launcher
