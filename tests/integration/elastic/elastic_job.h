// An elastic job started by hand, as a shell or a Kubernetes pod would start it: the
// scheduler, the servers and the first workers each a `dtrain run` process with
// ps-lite's variables and DTRAIN_ELASTIC; more workers join with no rank.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {

struct ElasticJobOptions {
  std::string elastic = "2:3";  // DTRAIN_ELASTIC
  int workers = 2;              // DMLC_NUM_WORKER: the workers the job starts with
  int servers = 2;
  int epochs = 2;
  int examples = 3000;
  std::vector<std::string> scheduler_flags;
  std::vector<std::string> worker_flags;   // more flags for every worker, joiners too
  std::map<std::string, std::string> env;  // more variables for every process
};

class ElasticJob {
 public:
  explicit ElasticJob(ElasticJobOptions options);

  // A worker that asks for no rank: it joins the running job. `flags` go after the
  // job's worker flags (a later flag wins); `env` overrides the job's variables.
  Subprocess& AddJoiner(const std::vector<std::string>& flags = {}, const std::map<std::string, std::string>& env = {});

  // SIGKILLs servers()[i] and starts a new server process asking for its rank (which
  // the dead one logged when it registered), as `dtrain launch` restarts one. The old
  // process is kept (its output stays readable) and servers()[i] is the new one.
  Subprocess& RestartServer(int i);

  // SIGKILLs the scheduler and starts it again on the same port, as `dtrain launch`
  // or Kubernetes would: the nodes register again with it.
  void RestartScheduler();

  Subprocess& scheduler() { return *scheduler_; }
  Subprocess& worker(int i) { return *workers_.at(static_cast<size_t>(i)); }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  std::vector<std::unique_ptr<Subprocess>>& servers() { return servers_; }
  // Where the scheduler writes PREFIX-membership.json (--membership-prefix).
  const std::string& prefix() const { return prefix_; }

 private:
  std::unique_ptr<Subprocess> Start(const std::string& role, int rank, const std::vector<std::string>& flags = {},
                                    const std::map<std::string, std::string>& env = {});

  ElasticJobOptions options_;
  std::map<std::string, std::string> env_;
  std::string prefix_;
  std::vector<std::string> scheduler_flags_;
  std::unique_ptr<Subprocess> scheduler_;
  std::vector<std::unique_ptr<Subprocess>> old_schedulers_;
  std::vector<std::unique_ptr<Subprocess>> servers_;
  std::vector<std::unique_ptr<Subprocess>> old_servers_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

}  // namespace dtrain::testing
