// The elastic settings of a job that `dtrain launch` or `dtrain run` (TensorFlow 1
// style) starts (docs/elastic.md): --elastic MIN:MAX, --elastic-lr scale|keep and
// --replay-membership FILE, checked here before any process starts, then handed on:
// DTRAIN_ELASTIC to every child, --elastic-lr and --replay-membership to the
// scheduler only (the only role that acts on them).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/elastic/elastic_spec.h"
#include "common/flags.h"
#include "common/kvstore_mode.h"

namespace dtrain::launcher {

struct LaunchElastic {
  elastic::ElasticSpec spec;
  // --elastic-lr was given (set by its flag): the scheduler is told it (otherwise it
  // keeps its default, the same "scale").
  bool lr_given = false;
};

// Declares --elastic, --elastic-lr and --replay-membership from the command line only:
// like the job's shape (-n, -s), the launcher takes them from no environment (its
// environment is its children's business), so an exported DTRAIN_ELASTIC cannot make
// a job elastic behind the launcher's back.
void AddLaunchElasticFlags(FlagSet& flags, LaunchElastic* settings);

// After parsing: checks the settings against the job, each INVALID_ARGUMENT naming the
// flags: elastic::CheckElasticSpec (-n within MIN..MAX, dist_sync, --elastic-lr and
// --replay-membership only with --elastic), and a --replay-membership file that parses
// (elastic::ReadMembershipFile), has --elastic's bounds and starts with workers 0..n-1
// from step 0, as the job does.
absl::Status CheckLaunchElastic(const LaunchElastic& settings, int64_t num_workers, KVStoreMode mode);

// A resume of an elastic job: --load-epoch E (> 0) and --model-prefix P among the
// worker flags. The checkpoint's membership, P-000E.membership.json, becomes the
// scheduler's --resume-membership (SchedulerElasticArgs), and -n must be its worker
// count: INVALID_ARGUMENT naming the file and the count otherwise, or when the file is
// missing or does not parse. Nothing for a fresh start or a job that is not elastic.
absl::Status ResolveElasticResume(const std::vector<std::string>& worker_args, int64_t num_workers,
                                  LaunchElastic* settings);

// DTRAIN_ELASTIC for every child: "MIN:MAX", or "" when the job is not elastic (an
// empty variable reads as unset, so one inherited from the launcher's environment
// cannot reach the children either).
std::pair<std::string, std::string> ElasticEnv(const elastic::ElasticSpec& spec);

// The scheduler's own flags: --elastic-lr when given, --replay-membership and
// --resume-membership when set; nothing for a job that is not elastic.
std::vector<std::string> SchedulerElasticArgs(const LaunchElastic& settings);

// ", elastic 2:4: workers may join and leave" for the launcher's start line, "" when
// not elastic.
std::string ElasticSummary(const elastic::ElasticSpec& spec);

// The command that adds one more worker to the running elastic job whose children
// share `job_env` (DTRAIN_SCHEDULER_ADDR among them): those of its variables a worker
// needs to join (no DTRAIN_RANK: the scheduler gives it the lowest free one), then
// `WORKER-BINARY --kv-store MODE WORKER-FLAGS`, shell-quoted where needed.
// What the launcher of an elastic job says once its scheduler runs (nothing when not
// elastic): "to add a worker while it runs: " and JoinCommand, and with TLS (`tls_dir`
// not empty: the certificates LaunchTls wrote, one per rank up to MAX) the rank and
// the files the joiner must take, since a certificate names its rank.
std::vector<std::string> JoinInstructions(const elastic::ElasticSpec& spec,
                                          const std::vector<std::pair<std::string, std::string>>& job_env,
                                          const std::string& worker_binary, KVStoreMode mode,
                                          const std::vector<std::string>& worker_args, const std::string& tls_dir);

std::string JoinCommand(const std::vector<std::pair<std::string, std::string>>& job_env,
                        const std::string& worker_binary, KVStoreMode mode,
                        const std::vector<std::string>& worker_args);

}  // namespace dtrain::launcher
