// Job ids: what every process of one job carries (--job-id, DTRAIN_JOB_ID), so that a
// process of another job, or a restarted one that would otherwise bring an id of its
// own, is told apart (docs/recovery.md, "Identity").
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// "job-<16 hex digits>", random: a new job's id (the launcher's, or a scheduler's
// that no node brought one to).
std::string NewJobId();

// "job-<16 hex digits>" computed from `text` (FNV-1a 64), for launches where each
// process is started by hand and all must agree without talking: the TF1-style
// cluster spec is the same text on every host and at every restart.
std::string JobIdOf(std::string_view text);

}  // namespace dtrain
