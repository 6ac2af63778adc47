#include "common/elastic/membership_proto.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dtrain::elastic {

double Membership::LrFactor(int index) const {
  const auto& generations = schedule.generations();
  if (index < 0 || index >= static_cast<int>(generations.size())) return 1.0;
  return ElasticLrFactor(lr, static_cast<int>(generations[index].ranks.size()), workers_at_start);
}

v1::MembershipGeneration GenerationToProto(const Generation& g) {
  v1::MembershipGeneration out;
  out.set_from_step(g.from_step);
  for (int r : g.ranks) out.add_ranks(r);
  return out;
}

v1::MembershipState MembershipToProto(const Membership& m) {
  v1::MembershipState out;
  out.set_min_workers(m.schedule.min_workers());
  out.set_max_workers(m.schedule.max_workers());
  for (const Generation& g : m.schedule.generations()) *out.add_generations() = GenerationToProto(g);
  out.set_lr(std::string(ElasticLrName(m.lr)));
  out.set_workers_at_start(static_cast<int32_t>(m.workers_at_start));
  return out;
}

absl::StatusOr<Generation> GenerationFromProto(const v1::MembershipGeneration& g, int max_workers) {
  // Counted before anything is copied: a message may name any number of ranks.
  if (g.ranks_size() > max_workers || g.ranks_size() > kMaxElasticWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("membership generation from step ", g.from_step(), " names ",
                                                   g.ranks_size(), " ranks, above the job's MAX ", max_workers));
  }
  Generation out;
  out.from_step = g.from_step();
  out.ranks.assign(g.ranks().begin(), g.ranks().end());
  return out;
}

absl::StatusOr<Membership> MembershipFromProto(const v1::MembershipState& m) {
  if (m.max_workers() < 1 || m.max_workers() > kMaxElasticWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership: max_workers ", m.max_workers(), " is outside 1..", kMaxElasticWorkers));
  }
  if (m.generations_size() < 1) return absl::InvalidArgumentError("membership: no generation");
  std::vector<Generation> generations;
  generations.reserve(static_cast<size_t>(m.generations_size()));
  for (const auto& g : m.generations()) {
    DTRAIN_ASSIGN_OR_RETURN(Generation next, GenerationFromProto(g, m.max_workers()));
    generations.push_back(std::move(next));
  }
  Membership out;
  DTRAIN_ASSIGN_OR_RETURN(out.schedule,
                          MembershipSchedule::Create(m.min_workers(), m.max_workers(), std::move(generations)));
  auto lr = ParseElasticLr(m.lr());
  if (!lr.ok()) return absl::InvalidArgumentError(absl::StrCat("membership: lr: ", lr.status().message()));
  out.lr = *lr;
  if (m.workers_at_start() < m.min_workers() || m.workers_at_start() > m.max_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("membership: workers_at_start ", m.workers_at_start(),
                                                   " is outside ", m.min_workers(), "..", m.max_workers()));
  }
  out.workers_at_start = m.workers_at_start();
  return out;
}

}  // namespace dtrain::elastic
