// What Membership takes and gives: plain values, no protobuf. The service converts
// them to and from the wire (membership_proto.h); the fields mean what the
// scheduler.proto messages of the same names say.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/defaults.h"
#include "common/kvstore_mode.h"
#include "common/role.h"

namespace dtrain::scheduler {

// The role is the common dtrain::Role (common/role.h). It has no "unspecified": a
// request that names none is refused where the wire is read (membership_proto.h),
// so every key and record here holds a real role. Its order is the wire's: servers
// sort before workers (NodeKey::operator<).

enum class NodeState {
  kUnspecified = 0,
  kRegistered = 1,  // registered, heartbeat stream not yet open
  kAlive = 2,       // heartbeating
  kDead = 3,        // stream broke or heartbeats stopped
  kFinished = 4,    // left cleanly (Leave)
  kRejoining = 5,   // a new incarnation took the rank after the job started, not yet resumed
};

struct NodeKey {
  Role role = Role::kWorker;  // always set by whoever makes the key
  int rank = -1;
  bool operator<(const NodeKey& o) const { return role != o.role ? role < o.role : rank < o.rank; }
  bool operator==(const NodeKey& o) const { return role == o.role && rank == o.rank; }
};

// "worker 1".
std::string NodeName(const NodeKey& key);
// "NODE_STATE_ALIVE": how texts name a state (as the wire's enum does).
std::string StateName(NodeState state);

// A worker's figures for one epoch.
struct EpochFigures {
  int64_t epoch = 0;
  int64_t samples = 0;
  double train_seconds = 0;
  int64_t eval_correct = 0;
  int64_t eval_count = 0;
  double eval_loss_sum = 0;
};

// A node as Membership sees it.
struct NodeRecord {
  Role role = Role::kWorker;  // always set by whoever fills the record
  int rank = -1;
  std::string address;
  NodeState state = NodeState::kUnspecified;
  int64_t last_step = 0;
  int64_t last_heard_unix_ms = 0;
  std::string hostname;
  int pid = 0;
  double samples_per_sec = 0;
  uint64_t incarnation = 0;  // of the process holding the rank now
  int restarts = 0;          // new processes that took the rank after the job started
  int64_t dead_since_unix_ms = 0;
  std::string death_reason;
  std::vector<EpochFigures> recent_epochs;  // oldest first
};

// A node asking for a rank.
struct Registration {
  Role role = Role::kWorker;  // membership admits only servers and workers
  std::string address;
  int requested_rank = -1;  // -1: any
  std::string hostname;
  int pid = 0;
  int num_workers = 0;  // 0: not said
  int num_servers = 0;
  std::string job_id;
  uint64_t incarnation = 0;                   // 0: a new process
  int replication = 0;                        // 0: not said
  std::vector<uint64_t> worker_incarnations;  // a server's: per worker rank, the newest it admitted
};

// The job's shape and its servers, sorted by rank.
struct ClusterShape {
  int num_workers = 0;
  int num_servers = 0;
  std::vector<NodeRecord> servers;
  KVStoreMode kv_store = kDefaultJobMode;
  std::string job_id;
  int replication = 1;
};

}  // namespace dtrain::scheduler
