// dtrain: the command line users type. A table of subcommands; each lives in its
// own file (launch_command.cc, exec_command.cc, ...). Add new ones to kCommands.
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/version.h"
#include "services/launcher/commands.h"

namespace dtrain::launcher {
namespace {

struct Command {
  const char* name;
  const char* summary;
  std::function<int(const std::vector<std::string>&)> run;
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"launch", "start a scheduler, servers and workers on this machine", LaunchCommand},
      {"certs", "make a CA and per-process certificates for a job with mutual TLS", CertsCommand},
      {"predict", "classify images with a dtrain-infer server", PredictCommand},
      {"run", "run the role named by DTRAIN_ROLE or DMLC_ROLE, or a TF1 --ps_hosts/--worker_hosts task", RunCommand},
      {"status", "show a running job's nodes: role, rank, state, step, speed", StatusCommand},
      {"health", "ask a gRPC server's health service, over TLS if need be (exec probes)", HealthCommand},
      {"export", "write a checkpoint's weights as safetensors (Python, numpy, other frameworks)", ExportCommand},
      {"plot", "draw PREFIX-metrics.csv (loss, accuracy, speed per epoch) to PNG/SVG", PlotCommand},
      {"scheduler", "run dtrain-scheduler", [](const auto& a) { return ExecRole("scheduler", a); }},
      {"server", "run dtrain-server", [](const auto& a) { return ExecRole("server", a); }},
      {"worker", "run dtrain-worker", [](const auto& a) { return ExecRole("worker", a); }},
  };
  return commands;
}

void PrintUsage(FILE* out) {
  std::fputs(
      "usage: dtrain <command> [args]   (dtrain <command> --help for its flags)\n"
      "       dtrain --version\n\ncommands:\n",
      out);
  for (const auto& c : Commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "help" || name == "-h" || name == "--help") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::printf("%s\n", VersionText("dtrain").c_str());
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : Commands()) {
    if (name == c.name) return c.run(args);
  }
  std::fprintf(stderr, "dtrain: unknown command '%s'\n", name.c_str());
  PrintUsage(stderr);
  return 2;
}

}  // namespace
}  // namespace dtrain::launcher

int main(int argc, char** argv) { return dtrain::launcher::Main(argc, argv); }
