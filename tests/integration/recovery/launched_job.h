// A `dtrain launch` job for the recovery tests: find its children, wait for a given
// node's log line, and read the final weights.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {

// The launcher's child running `role` ("worker", "server", "scheduler") with rank
// `rank` (its DTRAIN_RANK; the scheduler has none), or -1.
pid_t FindLaunchedChild(pid_t launcher, const std::string& role, int rank);

// Waits until a line of `job`'s output from `who` ("[worker 1]", "[scheduler]")
// contains `text`, starting at byte `from` of the output. Returns the offset just
// after that line, or std::string::npos at `timeout` or when the job exited first.
size_t WaitForLine(Subprocess& job, const std::string& who, const std::string& text, absl::Duration timeout,
                   size_t from = 0);

// The `weights-fnv64=` values of the "Training done" lines, in output order.
std::vector<std::string> FinalWeights(const std::string& output);

// The process's text file `path` ("" when unreadable).
std::string ReadTextFile(const std::string& path);

// $DTRAIN_CHAOS_SEED (default 1, also when unreadable): moves the recovery tests' kill
// moments; tests/integration/recovery/run_chaos.sh loops over it.
uint64_t ChaosSeed();

// The final weights of `argv`'s uninterrupted run (exit 0, `num_workers` workers
// agreeing). Computed once per ctest run and shared by the scenarios through
// $DTRAIN_TEST_SHARED_DIR/`name` (emptied by each run's setup), under a lock; without
// the variable (a binary run by hand), once per process and name. "" after a test
// failure carrying the run's output when the run failed.
std::string SharedReference(const std::string& name, const std::vector<std::string>& argv, int num_workers,
                            absl::Duration timeout);

// The recovery tests' job: `dtrain launch -n 2 -s 2 LAUNCH_FLAGS -- --network lenet
// --num-epochs 2 --num-examples 3000 --num-test-examples 500 --seed 11 --disp-batches 1
// --model-prefix PREFIX WORKER_FLAGS` (23 steps per epoch, a Batch line each).
std::vector<std::string> ChaosRecipe(const std::string& prefix, const std::vector<std::string>& launch_flags = {},
                                     const std::vector<std::string>& worker_flags = {});
// The failover tests' job: `dtrain launch -n 2 -s SERVERS --kv-store dist_sync
// --replication R [--max-restarts 3 --restart-backoff 0.1] -- --network lenet --num-epochs
// 6 --num-examples 3000 --num-test-examples 500 --seed 11 --disp-batches 1 --model-prefix
// PREFIX` (138 steps: a restarted server is copied its range, and a second kill half a
// second after a first still lands in training). Tests that share its reference run
// ("server-failover-reference", 3 servers, replication 1) build it here, so the argv
// they share cannot drift apart.
std::vector<std::string> FailoverRecipe(const std::string& prefix, int servers, int replication, bool restarts);
// The rollback tests' job: `dtrain launch -n 2 -s 2 [--max-restarts 3 --restart-backoff
// 0.1 --snapshot-every 50] -- --network lenet --num-epochs 3 --num-examples 3000
// --num-test-examples 500 --seed 5 --disp-batches 1 --model-prefix PREFIX` (69 steps).
std::vector<std::string> SnapshotRecipe(const std::string& prefix, bool snapshots);

// The recipe's uninterrupted dist_sync weights, shared by every test that compares with
// them ("chaos-reference"): chaos, security, staleness and overlap tests.
std::string ChaosReference(absl::Duration timeout);

}  // namespace dtrain::testing
