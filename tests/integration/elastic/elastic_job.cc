#include "tests/integration/elastic/elastic_job.h"

#include <signal.h>

#include <cstdlib>
#include <utility>

#include "absl/time/time.h"

#include "tests/integration/common/free_port.h"

namespace dtrain::testing {

ElasticJob::ElasticJob(ElasticJobOptions options) : options_(std::move(options)) {
  env_ = {{"DMLC_PS_ROOT_URI", "127.0.0.1"},
          {"DMLC_PS_ROOT_PORT", std::to_string(FreePort())},
          {"DMLC_NUM_WORKER", std::to_string(options_.workers)},
          {"DMLC_NUM_SERVER", std::to_string(options_.servers)},
          {"DTRAIN_BIND_HOST", "127.0.0.1"},
          {"DTRAIN_ROLE", ""},
          {"DTRAIN_ELASTIC", options_.elastic}};
  for (auto& [k, v] : options_.env) env_[k] = v;
  prefix_ = MakeTempDir() + "/m";
  scheduler_flags_ = {"--membership-prefix", prefix_};
  scheduler_flags_.insert(scheduler_flags_.end(), options_.scheduler_flags.begin(), options_.scheduler_flags.end());
  scheduler_ = Start("scheduler", -1, scheduler_flags_);
  for (int s = 0; s < options_.servers; ++s) servers_.push_back(Start("server", -1));
  for (int w = 0; w < options_.workers; ++w) workers_.push_back(Start("worker", w));
}

void ElasticJob::RestartScheduler() {
  scheduler_->Signal(SIGKILL);
  scheduler_->Wait(absl::Seconds(10));
  old_schedulers_.push_back(std::move(scheduler_));
  scheduler_ = Start("scheduler", -1, scheduler_flags_);
}

Subprocess& ElasticJob::AddJoiner(const std::vector<std::string>& flags,
                                  const std::map<std::string, std::string>& env) {
  workers_.push_back(Start("worker", -2, flags, env));
  return *workers_.back();
}

Subprocess& ElasticJob::RestartServer(int i) {
  Subprocess& old = *servers_.at(static_cast<size_t>(i));
  // A registered server's lines name it: "[server 2] ... listening on ...". One that
  // never said so is started with no rank (the test sees what the scheduler makes of it).
  const std::string& out = old.output();
  const size_t listening = out.find("listening on");
  const size_t tag = listening == std::string::npos ? listening : out.rfind("[server ", listening);
  const int rank = tag == std::string::npos ? -1 : std::atoi(out.c_str() + tag + 8);
  old.Signal(SIGKILL);
  old.Wait(absl::Seconds(10));
  old_servers_.push_back(std::move(servers_[static_cast<size_t>(i)]));
  servers_[static_cast<size_t>(i)] = Start("server", rank);
  return *servers_[static_cast<size_t>(i)];
}

std::unique_ptr<Subprocess> ElasticJob::Start(const std::string& role, int rank, const std::vector<std::string>& flags,
                                              const std::map<std::string, std::string>& more_env) {
  auto env = env_;
  for (auto& [k, v] : more_env) env[k] = v;
  env["DMLC_ROLE"] = role;
  std::vector<std::string> argv = {Bin("dtrain"), "run"};
  if (role == "server" && rank >= 0) env["DMLC_SERVER_ID"] = std::to_string(rank);
  if (role == "worker") {
    // -2: a joiner, which names no rank.
    if (rank >= 0) env["DMLC_WORKER_ID"] = std::to_string(rank);
    for (const std::string& f :
         {std::string("--kv-store"), std::string("dist_sync"), std::string("--network"), std::string("lenet"),
          std::string("--num-epochs"), std::to_string(options_.epochs), std::string("--num-examples"),
          std::to_string(options_.examples), std::string("--num-test-examples"), std::string("500"),
          std::string("--seed"), std::string("5"), std::string("--disp-batches"), std::string("1")}) {
      argv.push_back(f);
    }
    argv.insert(argv.end(), options_.worker_flags.begin(), options_.worker_flags.end());
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  return std::make_unique<Subprocess>(argv, env);
}

}  // namespace dtrain::testing
