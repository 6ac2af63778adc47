// `dtrain run` and `dtrain scheduler|server|worker`: hand over to the role's binary.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "common/role.h"
#include "common/version.h"
#include "services/launcher/commands.h"

namespace dtrain::launcher {

std::string SelfDir() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string self(path, static_cast<size_t>(n));
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

int ExecRole(const std::string& role, const std::vector<std::string>& args) {
  if (!ParseRole(role).ok()) {
    std::fprintf(stderr, "dtrain: unknown role '%s' (expected scheduler, server or worker)\n", role.c_str());
    return 2;
  }
  const std::string path = SelfDir() + "/dtrain-" + role;
  std::vector<std::string> storage{path};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  std::fprintf(stderr, "dtrain: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return 127;
}

namespace {

constexpr const char* kRunUsage =
    "usage: dtrain run [ARGS]\n"
    "Runs the role named by DTRAIN_ROLE (or DMLC_ROLE): scheduler, server or worker,\n"
    "passing ARGS on; the cluster comes from DTRAIN_* / DMLC_* variables.\n"
    "   or: dtrain run --ps_hosts=H:P,... --worker_hosts=H:P,... --job_name=ps|worker --task_index=N\n"
    "       [-- WORKER-FLAGS] (or TF_CONFIG): a TensorFlow 1 style task (dtrain run --ps_hosts= --help).\n";

bool Has(const std::vector<std::string>& args, std::initializer_list<const char*> names) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    for (const char* n : names) {
      if (a == n) return true;
    }
  }
  return false;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  if (IsTfClusterRun(args)) return TfRunCommand(args);
  // Read before any FlagSet, and by none: the role picks which binary parses `args`
  // (they are its flags, not ours), so no flag of this command could carry it.
  const char* role = std::getenv("DTRAIN_ROLE");
  if (role == nullptr || *role == '\0') role = std::getenv("DMLC_ROLE");
  if (role == nullptr || *role == '\0') {
    // With a role, --help and --version go on to the role's binary.
    if (Has(args, {"--help", "-h", "-help"})) {
      std::fputs(kRunUsage, stdout);
      return 0;
    }
    if (Has(args, {"--version"})) {
      std::printf("%s\n", VersionText("dtrain run").c_str());
      return 0;
    }
    std::fprintf(stderr, "%sdtrain run: neither DTRAIN_ROLE nor DMLC_ROLE is set\n", kRunUsage);
    return 2;
  }
  return ExecRole(role, args);
}

}  // namespace dtrain::launcher
