#include "services/worker/elastic_steps.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/membership_watch.h"

namespace dtrain::worker {

RedoPlan PlanRedo(const elastic::MembershipSchedule& schedule, int rank, int64_t step) {
  RedoPlan redo;
  redo.step = step;
  redo.generation = schedule.IndexAt(step);
  const std::vector<int>& ranks = schedule.generations()[redo.generation].ranks;
  redo.workers = static_cast<int>(ranks.size());
  redo.left = !std::binary_search(ranks.begin(), ranks.end(), rank);
  return redo;
}

ElasticSteps::ElasticSteps(int rank, int64_t seed, int64_t num_examples, int64_t batch_size,
                           elastic::Membership membership, ElasticPart* tag)
    : rank_(rank),
      seed_(seed),
      num_examples_(num_examples),
      batch_size_(batch_size),
      membership_(std::move(membership)),
      tag_(tag) {
  plan_.emplace(seed, num_examples, batch_size, membership_.schedule);
}

absl::StatusOr<EpochTally> TallyEpoch(const elastic::DataPlan& plan, int64_t batch_size, int64_t step) {
  DTRAIN_ASSIGN_OR_RETURN(const elastic::StepPlace place, plan.Place(step));
  const int64_t first = place.epoch_first_step;
  const int64_t end = first + place.epoch_steps;  // one past the epoch's last step
  const auto& generations = plan.schedule().generations();
  EpochTally tally;
  for (size_t g = 0; g < generations.size(); ++g) {
    const int64_t from = std::max(first, generations[g].from_step);
    const int64_t to = std::min(end, g + 1 < generations.size() ? generations[g + 1].from_step : end);
    if (from >= to) continue;
    tally.samples += (to - from) * static_cast<int64_t>(generations[g].ranks.size()) * batch_size;
  }
  const elastic::Generation& last = plan.schedule().At(end - 1);
  tally.workers_at_end = static_cast<int>(last.ranks.size());
  tally.lowest_rank_at_end = last.ranks.front();
  return tally;
}

absl::StatusOr<EpochSpan> ElasticSteps::SpanFrom(int64_t step) const {
  DTRAIN_ASSIGN_OR_RETURN(const elastic::StepPlace place, plan_->Place(step));
  return EpochSpan{place.epoch, place.epoch_first_step, place.epoch_steps, step - place.epoch_first_step};
}

absl::StatusOr<std::vector<int64_t>> ElasticSteps::Batch(int64_t step) {
  DTRAIN_ASSIGN_OR_RETURN(const elastic::StepPlace place, plan_->Place(step));
  // The membership heard while redoing an earlier step may already have a generation
  // without this rank from here (a leave committed right after a join): this step is
  // where it leaves, as if a push of it had been refused.
  const elastic::Generation& g = membership_.schedule.generations()[place.generation];
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), rank_)) {
    return MembershipChangedStatus(
        step, absl::StrCat("worker ", rank_, " is not in ", membership_.schedule.Describe(place.generation)));
  }
  if (!share_ || share_->place.segment_first_step != place.segment_first_step || share_->place.epoch != place.epoch) {
    DTRAIN_ASSIGN_OR_RETURN(elastic::DataPlan::SegmentShare share, plan_->Share(step, rank_));
    share_ = std::move(share);
  }
  const int64_t begin = (step - place.segment_first_step) * batch_size_;
  if (begin < 0 || begin + batch_size_ > static_cast<int64_t>(share_->examples.size())) {
    return absl::InternalError(absl::StrCat("step ", step, ": batch at ", begin, " past rank ", rank_, "'s share of ",
                                            share_->examples.size(), " examples"));
  }
  if (tag_ != nullptr) tag_->SetMembershipGeneration(place.generation);
  return std::vector<int64_t>(share_->examples.begin() + begin, share_->examples.begin() + begin + batch_size_);
}

RedoPlan ElasticSteps::Adopt(elastic::Membership membership, int64_t step) {
  Take(std::move(membership));
  return RedoAt(step);
}

void ElasticSteps::Take(elastic::Membership membership) {
  membership_ = std::move(membership);
  plan_.emplace(seed_, num_examples_, batch_size_, membership_.schedule);
  share_.reset();
}

RedoPlan ElasticSteps::RedoAt(int64_t step) {
  const RedoPlan redo = PlanRedo(membership_.schedule, rank_, step);
  if (tag_ != nullptr && !redo.left) tag_->SetMembershipGeneration(redo.generation);
  return redo;
}

absl::StatusOr<RedoPlan> ElasticSteps::AfterChange(ClusterElastic& cluster, int64_t step, absl::Time deadline) {
  const int ran = tag_ != nullptr ? tag_->membership_generation() : -1;
  // A refusal by a generation this worker knows already (Batch's own) needs no new
  // membership; one by a generation it has not heard of waits for it.
  if (ran < 0 || membership_.schedule.IndexAt(step) <= ran) {
    const int held = static_cast<int>(membership_.schedule.generations().size());
    DTRAIN_ASSIGN_OR_RETURN(elastic::Membership next, cluster.AwaitGenerations(held, deadline));
    Take(std::move(next));
  }
  const RedoPlan redo = RedoAt(step);
  DTRAIN_LOG(WARNING) << "membership changed at step " << step << ": " << membership_.schedule.Describe(redo.generation)
                      << (redo.left ? "; this worker is not in it" : "; redoing the step in it");
  return redo;
}

absl::StatusOr<int64_t> AwaitJoinStep(ClusterElastic& cluster, int rank, absl::Time deadline) {
  DTRAIN_ASSIGN_OR_RETURN(elastic::Membership m, cluster.AwaitRank(rank, deadline));
  auto holds = [rank](const elastic::Generation& g) {
    return std::binary_search(g.ranks.begin(), g.ranks.end(), rank);
  };
  // A rank given again (a leaver's, or a joiner's removed before its first step) is in an
  // earlier generation already: this joiner's is the latest, once it holds the rank.
  while (!holds(m.schedule.latest())) {
    DTRAIN_ASSIGN_OR_RETURN(m, cluster.AwaitGenerations(static_cast<int>(m.schedule.generations().size()), deadline));
  }
  int index = static_cast<int>(m.schedule.generations().size()) - 1;
  while (index > 0 && holds(m.schedule.generations()[index - 1])) --index;
  const elastic::Generation& g = m.schedule.generations()[index];
  DTRAIN_LOG(INFO) << "worker " << rank << " joins at step " << g.from_step << ": " << g.ranks.size() << " workers";
  return g.from_step;
}

}  // namespace dtrain::worker
