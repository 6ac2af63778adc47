// Which job this scheduler runs. Knows nothing of gRPC or of ranks.
//
// A scheduler given --job-id runs that job. One without learns it from the nodes, and
// must learn the right one even when it restarted at the same moment as another node:
// a node that already belonged to the job (it holds an incarnation: it survived the
// scheduler) outranks a new process, whose id may be missing or wrong. So a claim's
// weight is, from strongest to weakest:
//   configured (--job-id)  >  a survivor's id  >  a new process's id  >  none.
// Until registration completes (Settle), a stronger claim of another id replaces a
// weaker one, and the caller withdraws the registrations that brought the weaker id; a
// claim no stronger than the one held, with another id, is refused. After Settle the
// id is fixed: any other is refused. An id is made up only at Settle, when no node
// brought one, so a new process that reaches a restarted scheduler first cannot give
// the job an id of its own while the survivors are still on their way.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace dtrain::scheduler {

class JobIdentity {
 public:
  enum class Source { kNone = 0, kNewProcess = 1, kSurvivor = 2, kConfigured = 3 };

  // `configured`: --job-id (empty: learned from the nodes).
  explicit JobIdentity(std::string configured);

  // A registration from `who` ("worker pid 77") bringing `job_id` (empty: none);
  // `survivor` when the process holds an incarnation. OK when accepted; then
  // `*displaced` (if given) is the weaker id this claim replaced, whose registrations
  // the caller must withdraw ("" when none). FAILED_PRECONDITION naming both ids when
  // the claim is refused.
  absl::Status Claim(const std::string& job_id, bool survivor, const std::string& who,
                     std::string* displaced = nullptr);

  // Registration is complete: the id is fixed from now on, made up when nobody brought one.
  void Settle();

  // OK for an empty id or this job's (after Settle, or when configured, a request
  // naming another job is refused); FAILED_PRECONDITION naming both ids otherwise.
  absl::Status Check(const std::string& job_id, const std::string& who) const;

  // The id ("" until one is claimed or made up).
  const std::string& id() const { return id_; }
  Source source() const { return source_; }
  bool settled() const { return settled_; }

 private:
  std::string id_;
  Source source_ = Source::kNone;
  bool settled_ = false;
};

}  // namespace dtrain::scheduler
