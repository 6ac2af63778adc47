// The flag parser (common/flags): every binary's command line and its DTRAIN_* /
// DMLC_* environment. The input is NUL-separated strings: those before the first
// empty string are the environment ("NAME=value"), the rest are argv[1..]. One flag of
// each type, each with environment names, as the real binaries declare them.
//
// The option byte decides whether positional arguments are accepted (`dtrain predict
// a.png`) or refused (the servers).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/flags.h"
#include "tests/fuzz/harness/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain;
  const fuzz::Input in = fuzz::SplitOptions(data, size);
  std::vector<std::string> parts;
  std::string_view rest = in.body;
  while (!rest.empty()) {
    const size_t nul = rest.find('\0');
    parts.emplace_back(rest.substr(0, nul));
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
  bool in_env = true;
  for (const std::string& p : parts) {
    if (in_env && p.empty()) {
      in_env = false;
      continue;
    }
    if (in_env) {
      const size_t eq = p.find('=');
      env[p.substr(0, eq)] = eq == std::string::npos ? "" : p.substr(eq + 1);
    } else {
      args.push_back(p);
    }
  }

  std::string kv_store = "local", lr_steps;
  int64_t num_epochs = 10;
  double lr = 0.1;
  bool verbose = false;
  FlagSet flags("fuzz", "flags under fuzzing");
  flags.AddString("kv-store", &kv_store, "mode", {"DTRAIN_KV_STORE", "DMLC_KV_STORE"});
  flags.AddString("lr-step-epochs", &lr_steps, "list");
  flags.AddInt("num-epochs", &num_epochs, "epochs", {"DTRAIN_NUM_EPOCHS"});
  flags.AddDouble("lr", &lr, "rate", {"DTRAIN_LR"});
  flags.AddBool("verbose", &verbose, "chatty", {"DTRAIN_VERBOSE"});
  flags.set_env_lookup([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  std::vector<std::string> positional;
  const absl::Status st = flags.Parse(args, (in.options & 1) ? &positional : nullptr);
  (void)flags.help_requested();
  (void)flags.WasSet("kv_store");
  (void)flags.Usage();
  if (st.ok()) {
    std::vector<int64_t> steps;
    (void)ParseIntList(lr_steps, &steps);
  }
  // The argc/argv form the mains call.
  std::vector<const char*> argv = {"fuzz"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  FlagSet again("fuzz", "flags under fuzzing");
  again.AddString("kv-store", &kv_store, "mode");
  (void)again.Parse(static_cast<int>(argv.size()), argv.data(), &positional);
  return 0;
}
