// The `dtrain` subcommands. Each takes the arguments after its name and returns
// the process's exit status (2 for a usage error). main.cc maps names to these.
#pragma once

#include <string>
#include <vector>

namespace dtrain::launcher {

// dtrain launch -n W -s S [--kv-store MODE] [--elastic MIN:MAX] [--bin-dir DIR] [--scheduler-port P] -- WORKER-FLAGS
int LaunchCommand(const std::vector<std::string>& args);

// dtrain run ARGS: execs dtrain-<role> for DTRAIN_ROLE (or ps-lite's DMLC_ROLE); with a
// TensorFlow 1 style spec, TfRunCommand.
int RunCommand(const std::vector<std::string>& args);

// dtrain run --ps_hosts=... --worker_hosts=... --job_name=... --task_index=N [-- WORKER-FLAGS],
// or TF_CONFIG (tf_run_command.cc). IsTfClusterRun: the args or environment ask for it.
int TfRunCommand(const std::vector<std::string>& args);
bool IsTfClusterRun(const std::vector<std::string>& args);

// dtrain scheduler|server|worker ARGS: execs the sibling binary dtrain-<role>.
// Returns only on failure.
int ExecRole(const std::string& role, const std::vector<std::string>& args);

// dtrain predict --server HOST:PORT (--images IDX [--labels IDX] | PNG...) [--render PNG]
int PredictCommand(const std::vector<std::string>& args);

// dtrain status --scheduler HOST:PORT [--watch [--interval S] [--count N]]: the job's
// nodes as a table (role, rank, address, state, step, samples/s, last heard).
int StatusCommand(const std::vector<std::string>& args);

// dtrain plot PREFIX [--output FILE.png|FILE.svg]: PREFIX-metrics.csv drawn by gnuplot.
int PlotCommand(const std::vector<std::string>& args);

// dtrain export PREFIX --epoch N [--format safetensors] [--output FILE]: a checkpoint's
// weights in a format other tools read (common/checkpoint/safetensors.h).
int ExportCommand(const std::vector<std::string>& args);

// dtrain certs --dir DIR [--job NAME] -n W -s S [--names a,b]: a CA and a certificate
// per process for a hand-launched job with mutual TLS.
int CertsCommand(const std::vector<std::string>& args);

// dtrain health --addr HOST:PORT [--service NAME] [--tls-ca ...]: grpc.health.v1 Check
// through the job's credentials (an exec probe where the kubelet's cannot speak TLS).
int HealthCommand(const std::vector<std::string>& args);

// The directory of the running executable, where the build puts its siblings.
std::string SelfDir();

}  // namespace dtrain::launcher
