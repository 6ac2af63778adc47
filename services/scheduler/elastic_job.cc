#include "services/scheduler/elastic_job.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/elastic/membership_file.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/scheduler/elastic_drop.h"
#include "services/scheduler/scheduler_metrics.h"

namespace dtrain::scheduler {
namespace {

std::string Plural(int n, const char* one) { return absl::StrCat(n, " ", one, n == 1 ? "" : "s"); }

// Workers 0 .. n-1 from step 0, or the membership of the checkpoint a resume starts from
// (--resume-membership), which must end with workers 0 .. n-1 under the job's bounds.
absl::StatusOr<elastic::MembershipSchedule> StartingSchedule(const elastic::ElasticSpec& spec, int num_workers) {
  std::vector<int> start;
  for (int r = 0; r < num_workers; ++r) start.push_back(r);
  if (spec.resume_membership.empty()) {
    return elastic::MembershipSchedule::Create(spec.min_workers, spec.max_workers, {{0, start}});
  }
  const std::string where = absl::StrCat("--resume-membership ", spec.resume_membership, ": ");
  absl::StatusOr<elastic::MembershipSchedule> saved = elastic::ReadMembershipFile(spec.resume_membership);
  if (!saved.ok()) return absl::InvalidArgumentError(absl::StrCat("--resume-membership: ", saved.status().message()));
  absl::StatusOr<elastic::MembershipSchedule> schedule =
      elastic::MembershipSchedule::Create(spec.min_workers, spec.max_workers, saved->generations());
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "under --elastic ", spec.min_workers, ":", spec.max_workers,
                                                   ": ", schedule.status().message()));
  }
  if (schedule->latest().ranks != start) {
    const int k = static_cast<int>(schedule->latest().ranks.size());
    return absl::InvalidArgumentError(absl::StrCat(
        where, "the checkpoint resumes with ", Plural(k, "worker"), " (",
        schedule->Describe(static_cast<int>(schedule->generations().size()) - 1), "), but the job starts with ",
        Plural(num_workers, "worker"), ": start it with -n ", k, " (DMLC_NUM_WORKER=", k, ")"));
  }
  return schedule;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ElasticJob>> ElasticJob::Create(ElasticJobOptions options) {
  const elastic::ElasticSpec& spec = options.spec;
  DTRAIN_ASSIGN_OR_RETURN(elastic::MembershipSchedule schedule, StartingSchedule(spec, options.num_workers));
  std::optional<elastic::MembershipSchedule> replay;
  if (!spec.replay_membership.empty()) {
    DTRAIN_ASSIGN_OR_RETURN(replay, elastic::ReadMembershipFile(spec.replay_membership));
  }
  absl::StatusOr<ElasticCoordinator> coordinator = ElasticCoordinator::Create(std::move(schedule), std::move(replay));
  if (!coordinator.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replay-membership ", spec.replay_membership, ": ", coordinator.status().message()));
  }
  std::unique_ptr<ElasticJob> job(new ElasticJob(std::move(options), *std::move(coordinator)));
  absl::MutexLock lock(&job->mu_);
  if (const std::string& file = job->options_.spec.resume_membership; !file.empty()) {
    const elastic::MembershipSchedule& resumed = job->coordinator_.schedule();
    DTRAIN_LOG(INFO) << "resuming with the checkpoint's membership (" << file
                     << "): " << resumed.Describe(static_cast<int>(resumed.generations().size()) - 1) << " after "
                     << Plural(static_cast<int>(resumed.generations().size()) - 1, "change");
  }
  if (job->options_.metrics != nullptr) job->options_.metrics->SetWorkers(job->options_.num_workers);
  // Written at the start too: a place that cannot be written is found before the job runs.
  if (const std::string& path = job->options_.membership_file; !path.empty()) {
    if (absl::Status s = elastic::WriteMembershipFile(path, job->coordinator_.schedule()); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot record the membership in ", path, " (--membership-prefix): ", s.message()));
    }
  }
  return job;
}

ElasticJob::ElasticJob(ElasticJobOptions options, ElasticCoordinator coordinator)
    : options_(std::move(options)), gates_(options_.num_servers), coordinator_(std::move(coordinator)) {}

std::string ElasticJob::SpecText() const {
  return absl::StrCat(options_.spec.min_workers, ":", options_.spec.max_workers);
}

bool ElasticJob::InJob(int rank) const {
  absl::MutexLock lock(&mu_);
  return coordinator_.Holds(rank);
}

absl::StatusOr<int> ElasticJob::Join(int requested, const std::set<int>& busy) {
  absl::MutexLock lock(&mu_);
  if (requested < 0) return coordinator_.Join(busy);
  DTRAIN_RETURN_IF_ERROR(coordinator_.JoinAs(requested));
  return requested;
}

std::vector<int> ElasticJob::Workers() const {
  absl::MutexLock lock(&mu_);
  return coordinator_.schedule().latest().ranks;
}

absl::Status ElasticJob::Leave(int rank) {
  absl::MutexLock lock(&mu_);
  const elastic::MembershipSchedule& schedule = coordinator_.schedule();
  const std::vector<int>& now = schedule.latest().ranks;
  const bool in_job = std::binary_search(now.begin(), now.end(), rank);
  if (in_job && !coordinator_.Leaving(rank) && coordinator_.WorkersAfterChange() - 1 < schedule.min_workers()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", rank, " may not leave: only ", Plural(coordinator_.WorkersAfterChange() - 1, "worker"),
                     " would remain, below --elastic ", SpecText(), "'s MIN ", schedule.min_workers()));
  }
  DTRAIN_RETURN_IF_ERROR(coordinator_.Leave(rank));
  DTRAIN_LOG(INFO) << "worker " << rank << " asked to leave; it goes with the next membership change";
  return absl::OkStatus();
}

void ElasticJob::Drop(int rank, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!coordinator_.Leave(rank).ok()) return;  // not in the latest generation: nothing to remove
  dead_[rank] = DeadWorker{why};
  DTRAIN_LOG(WARNING) << "worker " << rank << " died (" << why << ") and was not replaced: removing it from the job";
}

bool ElasticJob::RemoveFailedJoiner(int rank, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (coordinator_.WithdrawJoin(rank).ok()) {
    DTRAIN_LOG(WARNING) << "worker " << rank << " failed before its join was committed (" << why
                        << "): its join is withdrawn and the job goes on without it";
    return true;
  }
  const elastic::MembershipSchedule& schedule = coordinator_.schedule();
  const auto& gens = schedule.generations();
  auto has = [rank](const elastic::Generation& g) { return std::binary_search(g.ranks.begin(), g.ranks.end(), rank); };
  const bool joiner = gens.size() > 1 && has(gens.back()) && !has(gens[gens.size() - 2]);
  if (joiner && dead_.count(rank) > 0) {
    dead_[rank] = DeadWorker{why, gens.back().from_step};  // dropped as dead already
    return true;
  }
  if (!joiner || coordinator_.Leaving(rank) || coordinator_.WorkersAfterChange() - 1 < schedule.min_workers()) {
    return false;
  }
  if (!coordinator_.Leave(rank).ok()) return false;
  dead_[rank] = DeadWorker{why, gens.back().from_step};
  DTRAIN_LOG(WARNING) << "worker " << rank << " failed before its first step (" << why
                      << "): removing it from the job, which goes on without it";
  return true;
}

void ElasticJob::NoteLocked(const absl::Status& s) {
  if (s.ok() || std::string(s.message()) == last_note_) return;
  last_note_ = std::string(s.message());
  DTRAIN_LOG(INFO) << "membership change pending: " << s.message();
}

void ElasticJob::CommittedLocked(const std::string& line) {
  last_note_.clear();
  const elastic::MembershipSchedule& schedule = coordinator_.schedule();
  DTRAIN_LOG(INFO) << line << " (" << schedule.Describe(static_cast<int>(schedule.generations().size()) - 1) << ")";
  if (options_.metrics != nullptr) options_.metrics->SetWorkers(static_cast<int>(schedule.latest().ranks.size()));
  if (!options_.membership_file.empty()) {
    // The job goes on without the file (it is for a later replay or resume), but says so.
    if (absl::Status s = elastic::WriteMembershipFile(options_.membership_file, schedule); !s.ok()) {
      DTRAIN_LOG(ERROR) << "could not record the membership: " << s.message();
    }
  }
}

std::string ElasticJob::Advance() {
  absl::MutexLock lock(&mu_);
  if (!coordinator_.HasPendingChange() && !coordinator_.HasReplayedChangeToCome()) {
    AbortStrayProposalsLocked();
    return "";
  }
  if (!dead_.empty()) return AdvanceDropLocked();
  // Nothing is proposed before every server said which generations it holds: after a
  // scheduler restart they may hold some this process never heard of (TakeUpFrom).
  if (static_cast<int>(reported_.size()) < gates_.num_servers()) return "";
  absl::StatusOr<std::string> line = coordinator_.RunChange(gates_);
  if (line.ok()) {
    CommittedLocked(*line);
  } else {
    NoteLocked(line.status());
  }
  return "";
}

std::string ElasticJob::AdvanceDropLocked() {
  const elastic::MembershipSchedule& schedule = coordinator_.schedule();
  const int first = dead_.begin()->first;
  if (coordinator_.WorkersAfterChange() < schedule.min_workers()) {
    const absl::Time now = Now();
    if (below_min_since_ == absl::InfiniteFuture()) below_min_since_ = now;
    std::vector<int> dead;
    for (const auto& [rank, d] : dead_) dead.push_back(rank);
    const std::string missing =
        absl::StrCat(dead.size() == 1 ? "worker " : "workers ", absl::StrJoin(dead, ", "), " died (",
                     dead_.begin()->second.why, ") and only ", Plural(coordinator_.WorkersAfterChange(), "worker"),
                     " would remain, below --elastic ", SpecText(), "'s MIN ", schedule.min_workers());
    if (now - below_min_since_ > options_.rejoin_timeout) {
      return absl::StrCat(missing, "; no worker joined within the rejoin timeout of ",
                          absl::ToDoubleSeconds(options_.rejoin_timeout), " s (--rejoin-timeout)");
    }
    NoteLocked(absl::UnavailableError(absl::StrCat(missing, ": waiting for a worker to join")));
    return "";
  }
  below_min_since_ = absl::InfiniteFuture();
  // A rollback ordered for the removal: its plan stands while the servers reload.
  if (rollback_generation_ != 0) return CarryOutLocked(DropPlan{DropPlan::Kind::kRollBack, rollback_step_}, first);
  // Hold every server's pushes first: the versions they then report no longer move.
  const int generation = static_cast<int>(schedule.generations().size());
  std::vector<ServerVersions> versions;
  for (int i = 0; i < gates_.num_servers(); ++i) {
    absl::StatusOr<elastic::MembershipGate::Proposal> p = gates_.Propose(i, generation, 0);
    if (!p.ok()) {
      NoteLocked(p.status());
      continue;
    }
    const std::optional<v1::MembershipReport> report = gates_.LastReport(i);
    versions.push_back({report->min_version(), report->max_version()});
  }
  if (static_cast<int>(versions.size()) < gates_.num_servers()) return "";
  if (const std::string wait = JoinerWaitLocked(versions); !wait.empty()) {
    NoteLocked(absl::UnavailableError(wait));
    return "";
  }
  const std::optional<int64_t> snapshot = options_.rollback != nullptr ? options_.rollback->CommonStep() : std::nullopt;
  absl::StatusOr<DropPlan> plan = PlanDrop(first, versions, snapshot);
  if (!plan.ok()) return std::string(plan.status().message());
  if (std::string failure = FailedJoinerThatSteppedLocked(*plan); !failure.empty()) return failure;
  return CarryOutLocked(*plan, first);
}

std::string ElasticJob::JoinerWaitLocked(const std::vector<ServerVersions>& versions) const {
  const auto& gens = coordinator_.schedule().generations();
  if (gens.size() < 2) return "";
  const elastic::Generation& latest = gens.back();
  int64_t lo = latest.from_step;
  for (const ServerVersions& v : versions) lo = std::min(lo, v.min_version);
  if (lo >= latest.from_step) return "";
  auto has = [](const elastic::Generation& g, int r) { return std::binary_search(g.ranks.begin(), g.ranks.end(), r); };
  for (const auto& [rank, dead] : dead_) {
    if (has(latest, rank) && !has(gens[gens.size() - 2], rank)) {
      return absl::StrCat("worker ", rank, " joined at step ", latest.from_step, ": its removal waits for step ", lo,
                          " to merge with the workers of before");
    }
  }
  return "";
}

std::string ElasticJob::FailedJoinerThatSteppedLocked(const DropPlan& plan) const {
  for (const auto& [rank, dead] : dead_) {
    if (!dead.failed_joining_at) continue;
    if (plan.kind == DropPlan::Kind::kDropPending && plan.step == *dead.failed_joining_at) continue;
    return absl::StrCat("worker ", rank, " failed: ", dead.why, " (its generation from step ", *dead.failed_joining_at,
                        " merged a step already, so its failure is the job's)");
  }
  return "";
}

std::string ElasticJob::CarryOutLocked(const DropPlan& plan, int first) {
  bool drop_pending = true;
  int64_t step = plan.step;
  if (plan.kind == DropPlan::Kind::kRollBack) {
    if (rollback_generation_ == 0) {
      rollback_step_ = plan.step;
      rollback_generation_ = options_.rollback->Order(
          plan.step,
          absl::StrCat("rolled back to step ", plan.step, ": worker ", first,
                       " died after some keys merged its last step; the job goes on without it from there"),
          Now());
    }
    // The servers reload first; the commit from the snapshot's step follows.
    const std::optional<v1::RollbackOrder> done = options_.rollback->ForWorkers();
    if (!done || done->generation() < rollback_generation_) {
      NoteLocked(absl::UnavailableError(absl::StrCat("waiting for the servers to reload snapshot step ", rollback_step_,
                                                     " before worker ", first, " is removed")));
      return "";
    }
    drop_pending = false;
    step = rollback_step_;
  }
  absl::StatusOr<std::string> line = coordinator_.RunChangeFrom(gates_, step, drop_pending);
  if (!line.ok()) {
    NoteLocked(line.status());
    return "";
  }
  dead_.clear();
  rollback_generation_ = 0;
  CommittedLocked(*line);
  return "";
}

std::string ElasticJob::OnServerHeartbeat(int rank, uint64_t incarnation, const v1::MembershipReport* report,
                                          v1::HeartbeatResponse* response) {
  if (report != nullptr) {
    gates_.Report(rank, incarnation, *report);
    if (const std::string failure = TakeUpFrom(rank, *report); !failure.empty()) return failure;
  } else {
    gates_.Heard(rank, incarnation);
  }
  const std::string failure = Advance();
  if (std::optional<v1::MembershipOrder> order = gates_.OrderFor(rank)) *response->mutable_membership_order() = *order;
  return failure;
}

void ElasticJob::AbortStrayProposalsLocked() {
  if (static_cast<int>(reported_.size()) < gates_.num_servers()) return;
  const int next = static_cast<int>(coordinator_.schedule().generations().size());
  std::vector<int> holding;
  for (int server = 0; server < gates_.num_servers(); ++server) {
    const std::optional<v1::MembershipReport> r = gates_.LastReport(server);
    if (!r) return;
    // A server ahead would be taken up (a commit follows every server's answer, so then
    // the proposal is not stray): nothing is aborted.
    if (r->generations_held() > next) return;
    const bool proposed = r->generation() == next && r->error().empty() && r->committed_from() < 0 &&
                          r->phase() == v1::MembershipOrder::PHASE_PROPOSE;
    if (proposed) holding.push_back(server);
  }
  // Proposed by a scheduler before this one and committed nowhere: the servers would hold
  // its step until the workers' sync timeout.
  for (int server : holding) NoteLocked(gates_.Abort(server, next));
}

std::string ElasticJob::TakeUpFrom(int rank, const v1::MembershipReport& report) {
  absl::MutexLock lock(&mu_);
  reported_.insert(rank);
  if (report.generations_size() <= static_cast<int>(coordinator_.schedule().generations().size())) return "";
  std::vector<elastic::Generation> held;
  for (const v1::MembershipGeneration& g : report.generations()) {
    absl::StatusOr<elastic::Generation> one = elastic::GenerationFromProto(g, options_.spec.max_workers);
    if (!one.ok()) return absl::StrCat("server ", rank, "'s membership: ", one.status().message());
    held.push_back(*std::move(one));
  }
  if (absl::Status s = coordinator_.TakeUp(held); !s.ok()) {
    return absl::StrCat("server ", rank, "'s membership does not extend the scheduler's: ", s.message());
  }
  return "";
}

v1::MembershipState ElasticJob::State() const {
  elastic::Membership m;
  {
    absl::MutexLock lock(&mu_);
    m.schedule = coordinator_.schedule();
  }
  m.lr = options_.spec.lr;
  // The lr factor of --elastic-lr scale is relative to the first generation's count, a
  // resumed job's too (its schedule starts with the saved one's past).
  m.workers_at_start = static_cast<int64_t>(m.schedule.generations().front().ranks.size());
  return elastic::MembershipToProto(m);
}

absl::Status CheckNodeElastic(const std::string& theirs, const ElasticJob* job, const std::string& who) {
  const std::string ours = job == nullptr ? "" : job->SpecText();
  absl::StatusOr<elastic::ElasticSpec> spec = elastic::ParseElasticBounds(theirs);
  const std::string normal =
      !spec.ok() || !spec->enabled() ? theirs : absl::StrCat(spec->min_workers, ":", spec->max_workers);
  if (normal == ours) return absl::OkStatus();
  auto text = [](const std::string& e) { return e.empty() ? std::string("without --elastic") : "with --elastic " + e; };
  return absl::InvalidArgumentError(
      absl::StrCat(who, " was started ", text(theirs), ", but the job runs ", text(ours)));
}

}  // namespace dtrain::scheduler
