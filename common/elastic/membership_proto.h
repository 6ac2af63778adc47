// An elastic job's membership on the wire (dtrain.v1.MembershipState): the schedule,
// its bounds and the lr rule, as the scheduler sends them at registration and in
// heartbeats. The receiving side checks everything (the schedule's rules, the counts)
// before it uses a field: nothing from the wire is trusted for a size or a count.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/elastic/elastic_spec.h"
#include "common/elastic/membership_schedule.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::elastic {

// What a process of an elastic job knows of its membership.
struct Membership {
  MembershipSchedule schedule = MembershipSchedule::Fixed(1);
  ElasticLr lr = ElasticLr::kScale;
  int64_t workers_at_start = 1;

  // The factor the servers multiply the lr by in generation `index`.
  double LrFactor(int index) const;
};

v1::MembershipGeneration GenerationToProto(const Generation& g);
v1::MembershipState MembershipToProto(const Membership& m);

// INVALID_ARGUMENT naming the field for a message that breaks a rule: the schedule's
// (MembershipSchedule::Create), more ranks in a generation than max_workers or
// kMaxElasticWorkers, an lr rule other than "scale"/"keep", workers_at_start outside
// min..max.
absl::StatusOr<Generation> GenerationFromProto(const v1::MembershipGeneration& g, int max_workers);
absl::StatusOr<Membership> MembershipFromProto(const v1::MembershipState& m);

}  // namespace dtrain::elastic
