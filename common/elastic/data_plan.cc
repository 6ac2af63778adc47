#include "common/elastic/data_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dtrain::elastic {
namespace {

constexpr int64_t kNoStep = std::numeric_limits<int64_t>::max();

// The step the generation after `index` starts at; kNoStep for the latest.
int64_t NextChange(const MembershipSchedule& schedule, int index) {
  const auto& gens = schedule.generations();
  return index + 1 < static_cast<int>(gens.size()) ? gens[index + 1].from_step : kNoStep;
}

// Rank `rank`'s share of `pool` among `ranks` (ascending): pool[j], pool[j+k], ... of
// the first floor(|pool|/k)*k, j its position.
std::vector<int64_t> DealShare(const std::vector<int64_t>& pool, const std::vector<int>& ranks, int rank) {
  const int64_t k = static_cast<int64_t>(ranks.size());
  const int64_t j = std::lower_bound(ranks.begin(), ranks.end(), rank) - ranks.begin();
  const int64_t per = static_cast<int64_t>(pool.size()) / k;
  std::vector<int64_t> share(per);
  for (int64_t i = 0; i < per; ++i) share[i] = pool[j + i * k];
  return share;
}

}  // namespace

std::vector<int64_t> SeededOrder(int64_t n, const std::vector<uint64_t>& words) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::seed_seq seq(words.begin(), words.end());
  std::mt19937_64 rng(seq);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

DataPlan::DataPlan(int64_t seed, int64_t num_examples, int64_t batch_size, MembershipSchedule schedule)
    : seed_(seed), num_examples_(num_examples), batch_size_(batch_size), schedule_(std::move(schedule)) {}

DataPlan::SegmentLength DataPlan::Segment(int64_t first, int64_t pool) const {
  const int index = schedule_.IndexAt(first);
  const int64_t k = static_cast<int64_t>(schedule_.generations()[index].ranks.size());
  const int64_t full = batch_size_ > 0 ? pool / k / batch_size_ : 0;
  const int64_t next = NextChange(schedule_, index);
  if (full <= next - first) return {full, true};
  return {next - first, false};
}

absl::StatusOr<StepPlace> DataPlan::Place(int64_t step) const {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step ", step, " is negative"));
  int64_t first = 0;  // the epoch's first step
  for (int64_t epoch = 0;; ++epoch) {
    const SegmentLength head = Segment(first, num_examples_);
    if (head.steps == 0) {
      return absl::InvalidArgumentError(absl::StrCat(num_examples_, " examples leave no batch of ", batch_size_,
                                                     " for each of the ", schedule_.At(first).ranks.size(),
                                                     " workers of ", schedule_.Describe(schedule_.IndexAt(first))));
    }
    if (head.ends_epoch) {
      // Epochs of one generation repeat alike up to the next change: skip those that
      // end at or before `step` in one go.
      const int64_t next = NextChange(schedule_, schedule_.IndexAt(first));
      const int64_t skip =
          std::min((step - first) / head.steps, next == kNoStep ? kNoStep : (next - first) / head.steps);
      if (skip > 0) {
        first += skip * head.steps;
        epoch += skip - 1;
        continue;
      }
    }
    StepPlace place;
    bool found = false;
    int64_t pool = num_examples_;
    int64_t s = first;
    while (true) {
      const SegmentLength seg = Segment(s, pool);
      if (seg.steps == 0) break;  // a change left less than a batch a worker: the epoch ends
      if (!found && step < s + seg.steps) {
        found = true;
        place.segment_first_step = s;
        place.generation = schedule_.IndexAt(s);
      }
      pool -= static_cast<int64_t>(schedule_.At(s).ranks.size()) * batch_size_ * seg.steps;
      s += seg.steps;
      if (seg.ends_epoch) break;
    }
    if (found) {
      place.epoch = epoch;
      place.epoch_first_step = first;
      place.epoch_steps = s - first;
      return place;
    }
    first = s;
  }
}

absl::StatusOr<std::vector<int64_t>> DataPlan::Batch(int64_t step, int rank) const {
  DTRAIN_ASSIGN_OR_RETURN(const SegmentShare share, Share(step, rank));
  const int64_t first = (step - share.place.segment_first_step) * batch_size_;
  return std::vector<int64_t>(share.examples.begin() + first, share.examples.begin() + first + batch_size_);
}

absl::StatusOr<DataPlan::SegmentShare> DataPlan::Share(int64_t step, int rank) const {
  DTRAIN_ASSIGN_OR_RETURN(const StepPlace place, Place(step));
  const std::vector<int>& ranks = schedule_.generations()[place.generation].ranks;
  if (!std::binary_search(ranks.begin(), ranks.end(), rank)) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " has no batch at step ", step, ": it is not in ",
                                                   schedule_.Describe(place.generation)));
  }
  // Seeded by the rank's position in its generation, not its number: a resumed job
  // renumbers the workers 0 .. k-1 (ResumedAt) and must draw what the saved ones drew.
  auto order_of = [&](int64_t n, int64_t segment_first, const std::vector<int>& among, int r) {
    const int64_t position = std::lower_bound(among.begin(), among.end(), r) - among.begin();
    std::vector<uint64_t> words = {static_cast<uint64_t>(seed_), static_cast<uint64_t>(place.epoch),
                                   static_cast<uint64_t>(position)};
    if (segment_first != place.epoch_first_step) words.push_back(static_cast<uint64_t>(segment_first));
    return SeededOrder(n, words);
  };
  std::vector<int64_t> pool(num_examples_);
  std::iota(pool.begin(), pool.end(), 0);
  // The segments before this step's take their examples out of the pool.
  for (int64_t s = place.epoch_first_step; s < place.segment_first_step;) {
    const int64_t steps = Segment(s, static_cast<int64_t>(pool.size())).steps;
    std::vector<bool> used(num_examples_, false);
    for (int r : schedule_.At(s).ranks) {
      const std::vector<int64_t> share = DealShare(pool, schedule_.At(s).ranks, r);
      const std::vector<int64_t> order = order_of(static_cast<int64_t>(share.size()), s, schedule_.At(s).ranks, r);
      for (int64_t i = 0; i < steps * batch_size_; ++i) used[share[order[i]]] = true;
    }
    pool.erase(std::remove_if(pool.begin(), pool.end(), [&](int64_t e) { return used[e]; }), pool.end());
    s += steps;
  }
  const std::vector<int64_t> share = DealShare(pool, ranks, rank);
  const std::vector<int64_t> order =
      order_of(static_cast<int64_t>(share.size()), place.segment_first_step, ranks, rank);
  SegmentShare out;
  out.place = place;
  out.examples.resize(share.size());
  for (size_t i = 0; i < share.size(); ++i) out.examples[i] = share[order[i]];
  return out;
}

absl::StatusOr<int64_t> DataPlan::EpochFirstStep(int64_t epoch) const {
  int64_t first = 0;
  for (int64_t e = 0; e < epoch; ++e) {
    DTRAIN_ASSIGN_OR_RETURN(const StepPlace place, Place(first));
    if (place.epoch != e) {
      return absl::InternalError(absl::StrCat("step ", first, " falls in epoch ", place.epoch, ", not ", e));
    }
    first += place.epoch_steps;
  }
  return first;
}

}  // namespace dtrain::elastic
