// kvstore `dist_sync`, `dist_device_sync`, `dist_async`: gradients go to the parameter
// servers, which merge them and run the optimizer (MXNet's update_on_kvstore).
//
// Keys are the placement's slices (common/kv/placement.h); each PushPull sends every
// slice to its server on that server's stream, pipelined, then waits for all of them.
// Pulled weights land directly in the parameters' buffers. Servers are reached through
// ServerChannels (server_channel.h) that a ChannelFactory makes: PsClients over gRPC in
// production, in-process ones over ShardStores in tests (tests/unit/worker/kv/support).
// The code is split by the state each part owns: dist_kvstore_step.cc the pending
// step, dist_kvstore_handles.cc the OpenStep and PendingStep handed to the caller,
// dist_kvstore_failover.cc the replica chains, dist_kvstore_recovery.cc rejoin and
// rollback.
//
// Replication (DistOptions::replication R > 1, docs/recovery.md): each slice lives on
// its chain of R servers (common/kv/replica_chain.h). The worker pushes to every live
// member, takes the weights from the first and the version only from the others, and
// ends the step once all of them answered: every replica merged the same pushes, in
// rank order, so they hold bit-identical weights and none lags the step. A member whose
// stream breaks (UNAVAILABLE) is dead for the rest of the run; if it was the one
// giving the weights, the next live member, which has the step's push already, is
// asked for them. That is the whole failover: nothing to resend, no routing to learn.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/placement.h"
#include "services/worker/cluster.h"
#include "services/worker/cluster_recovery.h"
#include "services/worker/kv/kvstore.h"
#include "services/worker/kv/server_channel.h"
#include "services/worker/kv/push_compressor.h"
#include "services/worker/kv/replica_routing.h"
#include "common/defaults.h"

namespace dtrain::worker {

struct DistOptions {
  KVStoreMode mode = KVStoreMode::kDistSync;  // one of the dist_* modes
  // How long connecting to a server may take.
  absl::Duration connect_timeout = absl::Seconds(kDefaultConnectTimeoutSeconds);
  // How long one PushPull (and the init barrier) may wait for the other workers.
  absl::Duration sync_timeout = absl::Seconds(kDefaultSyncTimeoutSeconds);
  // Copies of each key range (common/kv/replica_chain.h), 1..servers. 1: none, a dead
  // server ends the job as before.
  int replication = 1;
  // Gradient compression of every push (--gc-type, --gc-threshold): each
  // slice is packed by the codec with this worker's residual of it (error feedback),
  // kept here for the life of the process. kNone: float32s, as before.
  kv::CompressionSpec compression{kv::CompressionType::kNone, kv::kDefaultTwoBitThreshold};
  // 2bit: the units of compression.threshold are gradients times this. The worker
  // passes its batch size: MXNet's gradients are sums over the batch (rescaled by
  // 1/batch in its optimizer) while ours are means, so --gc-threshold 0.5 quantises as
  // MXNet's 0.5 does; the quantum packed and sent (gc_threshold on the wire) is
  // threshold / gradient_scale, in the units of the gradients pushed.
  double gradient_scale = 1;
  // Pull compression (--pull-gc-type; dist_sync): each step's push-pull asks for the
  // packed weight change (KeyRequest::Target::kDelta), which the servers were
  // configured to pack. kNone: the weights, as before.
  kv::CompressionType pull_compression = kv::CompressionType::kNone;
  // dist_ssp: how many steps this worker may run ahead of the slowest (0..64).
  int staleness = 0;
  // dist_ssp: each push says how stale the weights it was computed on were, and the
  // servers scale it by 1/(1 + lag) (common/kv/stale_weight.h).
  // --no-weigh-stale: every push counts in full.
  bool weigh_stale = true;
  // Parameters above this many elements are cut into keys of this many (placement.h).
  // 0: kv::AutoChunkElems, or on a resume the bound its optimizer state was cut with.
  int64_t max_chunk_elems = 0;
  // An elastic job (--elastic, docs/elastic.md): pushes carry the membership generation
  // (KVStore::elastic()), a push held by a pending membership change is sent again
  // until the sync timeout, and one refused "membership changed" ends the step with
  // MembershipChangedStatus.
  bool elastic = false;
  // A worker that joins a running elastic job at this step (>= 0): Init skips the
  // start-up (Configure, the init barrier) and pulls the weights of exactly that
  // version. -1: not a joiner.
  int64_t join_step = -1;
  // Connections to each server (--connections-per-server): the worker's keys are spread
  // over that many PushPull streams per server (striped_channel.h), so that TLS runs on
  // more than one core at each end. Used by the default ChannelFactory only.
  int connections_per_server = 1;
};

// How DistKVStore reaches server `server_rank` at `address` as worker `worker_rank`:
// UNAVAILABLE naming the address when it cannot within `connect_timeout` (zero: do not
// wait; a server known dead then fails every request UNAVAILABLE). ConnectPsClient in
// production (ConnectPsClients with DistOptions::connections_per_server when none is
// given); tests hand in-process channels over a ShardStore.
using ChannelFactory = std::function<absl::StatusOr<std::unique_ptr<ServerChannel>>(
    int server_rank, const std::string& address, int worker_rank, absl::Duration connect_timeout)>;
// A PsClient over gRPC.
absl::StatusOr<std::unique_ptr<ServerChannel>> ConnectPsClient(int server_rank, const std::string& address,
                                                               int worker_rank, absl::Duration connect_timeout);

class DistKVStore : public KVStore, public ElasticPart {
 public:
  using Clock = std::function<absl::Time()>;

  // Connects to every server of `cluster`, which must outlive the store (its rank,
  // barriers and job status are used on every step), through `connect`. Every deadline
  // and timing of the store is taken on `clock`, which the channels must share (their
  // waits take deadlines of it).
  static absl::StatusOr<std::unique_ptr<DistKVStore>> Connect(const DistOptions& options, Cluster& cluster,
                                                              ChannelFactory connect = nullptr,
                                                              Clock clock = absl::Now);
  ~DistKVStore() override;

  KVStoreMode mode() const override { return options_.mode; }
  absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) override;
  // StartStep, then the handle's Wait with no deadline but the store's own.
  absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) override;
  // An OpenStep that pushes early: Offer sends the parameter's keys at once (a pull
  // answered early writes its weights, which backward is done with: autograd hands a
  // leaf its gradient after the node that used it ran), Send the rest. Its handle waits
  // slice by slice (dist_kvstore_handles.cc).
  std::unique_ptr<OpenStep> BeginStep(int64_t step) override;
  absl::StatusOr<checkpoint::OptimizerStates> SaveStates() override;
  absl::Status Settle(int64_t next_step) override;
  KVStoreStats stats() const override;
  PushPullTiming last_timing() const override { return last_timing_; }
  Recovery* recovery() override { return &recovery_; }
  ElasticPart* elastic() override { return options_.elastic ? this : nullptr; }
  void SetMembershipGeneration(int generation) override { membership_generation_ = generation; }
  int membership_generation() const override { return membership_generation_; }

 private:
  class EarlyStep;   // BeginStep's OpenStep
  class StepHandle;  // the PendingStep of the step in flight
  // KVStore::recovery(): Rejoin's step to redo, and Rollback (dist_kvstore_recovery.cc).
  class RecoveryPart final : public Recovery {
   public:
    explicit RecoveryPart(DistKVStore& store) : store_(store) {}
    int64_t resume_step() const override { return store_.resume_step_; }
    absl::StatusOr<int64_t> Rollback() override { return store_.Rollback(); }

   private:
    DistKVStore& store_;
  };

  // Past the sync timeout, what a client adds before it gives up on an answer itself.
  static constexpr absl::Duration kClientGrace = absl::Seconds(3);
  // How often a step waiting for the other workers checks whether the job still runs.
  static constexpr absl::Duration kJobCheckEvery = absl::Seconds(1);
  // Connecting to a restarted server named by a join notice (ApplyJoinNotices).
  static constexpr absl::Duration kRejoinConnectTimeout = absl::Seconds(5);

  DistKVStore(DistOptions options, Cluster& cluster, ChannelFactory connect, Clock clock);
  // Worker 0's part of Init: configures every server and gives each key its value.
  absl::Status ConfigureServers(const KVStoreInit& init);
  absl::Status WaitAllServers(absl::Time deadline);
  // Init of a process that replaced a dead worker (ClusterRecovery::rejoined()): the servers
  // are configured and training runs, so it asks them for the keys' versions, takes
  // the step to redo and pulls the weights that step starts from.
  absl::Status Rejoin(const KVStoreInit& init);
  using Versions = absl::flat_hash_map<uint64_t, kv::KeyVersion>;
  // Whether the servers' versions show that the start-up barrier's round completed
  // (a key past `start_version`, or a push of this rank accepted).
  static bool InitRoundPassed(const Versions& versions, int64_t start_version);
  // Every server's keys, their versions and this rank's last accepted push step.
  absl::StatusOr<Versions> FetchVersions();
  // "" when every key of the placement is held; else how many are not, naming one.
  std::string MissingKeys(const Versions& versions) const;
  // Waits for slice i's answer to the PushPull of `step`, checking the job every
  // second and, past the sync timeout, waiting on while a dead worker may rejoin
  // (time spent so added to *rejoin_wait); `deadline` (the caller's) cuts it short
  // with MissedDeadline.
  absl::Status AwaitSlice(size_t i, int64_t step, absl::Duration* rejoin_wait, absl::Time deadline);
  // DEADLINE_EXCEEDED for the caller's deadline passing while slice i's answer from
  // `server` was out: names the parameter, and what of the pending step is still out.
  absl::Status MissedDeadline(size_t i, int server) const;
  // Goes back to the servers' snapshot of the rollback order's step (Recovery::Rollback).
  absl::StatusOr<int64_t> Rollback();
  // A server's stream broke (the server died) or its parked pull was failed
  // by a rollback: waits (up to the sync timeout, checking the job every second) for
  // the scheduler's rollback order and returns RollbackStatus; the job's end or the
  // timeout return `error`.
  absl::Status AwaitRollback(const absl::Status& error);
  // The scheduler's rollback order not yet carried out; none without a recovery part.
  std::optional<RollbackOrder> PendingRollback() const;
  // Opens new streams to every server of `servers` (rank order).
  absl::Status Reconnect(const std::vector<ServerEndpoint>& servers);
  // A client for server `rank` at `address`, with this worker's pull timeout and identity.
  absl::StatusOr<std::unique_ptr<ServerChannel>> ConnectServer(int rank, const std::string& address,
                                                               absl::Duration timeout);

  // One answer awaited for a slice, from one member of its chain.
  struct Sent {
    int server = 0;
    ServerChannel::Ticket ticket = 0;
    bool weights = false;  // this answer writes the slice's weights (else: version only)
    KeyRequest request;    // what was submitted: a push held by a membership change goes again
  };
  // A push of sent_[i][j] that an elastic job's server held (IsMembershipPending):
  // submits it again after a pause (HeldPushPause) and returns OK, up to the sync
  // timeout from the first hold (`*held_since`, set then) or the caller's deadline,
  // then DEADLINE_EXCEEDED naming the step, the key and the pending change.
  absl::Status SubmitHeldAgain(size_t i, size_t j, int64_t step, const absl::Status& held, absl::Time caller_deadline,
                               absl::Time* held_since, uint64_t* attempts);
  // Join of a running elastic job (DistOptions::join_step): the weights of that version.
  absl::Status JoinAt(int64_t step);
  // After JoinAt's pulls of `step`: a chain member left out for lacking a key that
  // holds it now was copied it at a version <= step (a partner holds the answers of
  // the version it copies at until the copy is in), so the other workers count it from
  // that version on; this worker takes it back from `step`. A member still lacking the
  // key is copied it later, and the answers of that version tell this worker too.
  absl::Status TakeBackCopiedMembers(int64_t step);
  // FAILED_PRECONDITION naming the keys that differ when the servers' keys (`versions`)
  // are not exactly this worker's placement: a joiner started with another model.
  absl::Status CheckJoinerKeys(const Versions& versions, int64_t step) const;
  // Waits for sent_[i][j] as AwaitSlice describes.
  absl::Status AwaitSent(size_t i, size_t j, int64_t step, absl::Duration* rejoin_wait, absl::Time deadline);
  // Replication: `server` is out of every chain (logged once, with why) until a join
  // notice brings it back into a key's chain.
  void MarkDead(int server, const absl::Status& why);
  // After a step: restarted members that the servers brought back into keys' chains
  // (ServerChannel::TakeJoinNotices) take part from the next step; a dead one is reconnected.
  void ApplyJoinNotices();
  absl::Status NoReplicaLeft(size_t i) const { return routing_->NoReplicaLeft(i, placement_.slices[i].key); }
  // `st` from server `server` means it is gone and a replica can take over.
  bool FailOver(int server, const absl::Status& st);

  DistOptions options_;
  Cluster& cluster_;
  // cluster_.recovery(), asked once; null: never rejoined, no identity, no rollbacks.
  ClusterRecovery* const cluster_recovery_;
  ChannelFactory connect_;
  Clock now_;
  std::vector<std::unique_ptr<ServerChannel>> servers_;
  std::vector<ParamRef> params_;
  kv::Placement placement_;
  std::string optimizer_name_;
  PushPullTiming last_timing_;
  int64_t resume_step_ = -1;
  std::unique_ptr<ReplicaRouting> routing_;         // from Init: each slice's chain and who takes part
  absl::flat_hash_map<uint64_t, size_t> slice_of_;  // key -> slice index
  std::vector<std::vector<Sent>> sent_;             // this step's, per slice
  // dist_ssp: the version of each slice's weights this worker holds, from its last
  // push-pull's answer (-1: unknown), from which a push's lag is counted.
  std::vector<int64_t> held_versions_;
  // How many versions older than `step` the weights of slice `i` that a gradient of
  // `step` was computed on are (PushPullRequest.lag); 0 outside dist_ssp or with
  // DistOptions::weigh_stale off.
  int64_t StaleLag(int64_t step, size_t i) const;
  // Overlap: the slices of each parameter.
  std::vector<std::vector<size_t>> slices_of_param_;
  bool early_logged_ = false;
  // Sends slice `i`'s push-pull of `step` to every live member of its chain (sent_[i]).
  absl::Status SubmitSlice(int64_t step, size_t i, const float* grad);
  // EarlyStep::Offer: sends parameter `param_index`'s slices of `step` unless
  // (*offered)[param_index] says they went already, and marks them.
  absl::Status OfferEarly(int64_t step, size_t param_index, const float* grad, std::vector<bool>* offered);
  // EarlyStep::Send: sends the slices of `step` whose parameter `offered` does not mark
  // (empty: none offered) and makes the step the pending one (pending_id_). On an error
  // nothing of the step is outstanding.
  absl::Status SendStep(int64_t step, const std::vector<bool>& offered, const std::vector<const float*>& grads);
  // The bound Init cuts the keys with (DistOptions::max_chunk_elems, resolved).
  absl::StatusOr<int64_t> ChunkElems(const std::vector<int64_t>& sizes, const KVStoreInit& init) const;
  PushCompressor compressor_;   // the pushes' codec and residuals (none: uncompressed)
  absl::Duration replica_lag_;  // this step's, PushPullTiming::replica_lag
  // The step SendStep sent and FinishPending has not ended (-1: none): its handle's id
  // (a handle whose id is not pending_id_ any more was ended by Rollback), which slices
  // were waited for, the first error, and where the caller's time went.
  int64_t pending_step_ = -1;
  uint64_t pending_id_ = 0;
  absl::Status pending_status_;
  std::vector<bool> awaited_;
  absl::Duration pending_push_, pending_wait_, pending_pull_, pending_rejoin_wait_;
  bool pending_answered_ = false;
  // Waits for slice i of the pending step (once); an error is kept as pending_status_
  // after every answer still out was collected.
  absl::Status AwaitPending(size_t i, absl::Time deadline);
  // StepHandle::WaitParam and Wait for the step of handle `id`: the slices of one
  // parameter, or every slice and the step's end (timing, join notices, caught up).
  absl::Status AwaitPendingParam(uint64_t id, size_t param_index, absl::Time deadline);
  absl::Status FinishPending(uint64_t id, absl::Time deadline);
  // FAILED_PRECONDITION when handle `id`'s step is not the pending one.
  absl::Status CheckPending(uint64_t id) const;
  // FAILED_PRECONDITION naming `what` while a step's pulls are outstanding.
  absl::Status NothingPending(const char* what) const;
  // A rejoined process until its first step is done (it heartbeats "resuming").
  bool resuming_ = false;
  absl::Time joined_;
  RecoveryPart recovery_{*this};
  int membership_generation_ = 0;  // ElasticPart
};

}  // namespace dtrain::worker
