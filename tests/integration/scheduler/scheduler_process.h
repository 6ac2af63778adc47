// Test helpers: a real dtrain-scheduler process on loopback, and polling with a deadline.
#pragma once

#include <unistd.h>

#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "common/scheduler_client.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {

// True once `pred` holds, false if it still does not after `timeout`.
inline bool Eventually(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Starts `dtrain-scheduler --port PORT --port-file ...` (0: any port) into *process and
// waits (10 s at most) for the port it bound; 0 if it did not come up.
inline int StartScheduler(int port, int workers, int servers, const std::vector<std::string>& extra,
                          std::unique_ptr<Subprocess>* process) {
  const std::string port_file = MakeTempDir() + "/port";
  std::vector<std::string> argv = {Bin("dtrain-scheduler"),
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port),
                                   "--port-file",
                                   port_file,
                                   "--num-workers",
                                   std::to_string(workers),
                                   "--num-servers",
                                   std::to_string(servers)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  *process = std::make_unique<Subprocess>(argv);
  int bound = 0;
  Eventually(
      [&] {
        std::ifstream in(port_file);
        std::string text;
        return (in >> text) && absl::SimpleAtoi(text, &bound) && bound > 0;
      },
      absl::Seconds(10));
  return bound;
}

// A scheduler on any free port, for the test's duration.
struct SchedulerProcess {
  SchedulerProcess(int workers, int servers, std::vector<std::string> extra = {}) {
    const int port = StartScheduler(0, workers, servers, extra, &process);
    if (port > 0) address = "127.0.0.1:" + std::to_string(port);
  }
  std::unique_ptr<Subprocess> process;
  std::string address;  // empty if the scheduler did not come up
};

// The scheduler's view of one node (GetStatus), or nullopt if it has none or did not answer.
inline std::optional<v1::NodeInfo> FindNode(SchedulerClient& c, v1::Role role, int rank) {
  auto status = c.GetStatus(absl::Seconds(2));
  if (!status.ok()) return std::nullopt;
  for (const auto& n : status->nodes()) {
    if (n.role() == role && n.rank() == rank) return n;
  }
  return std::nullopt;
}

}  // namespace dtrain::testing
