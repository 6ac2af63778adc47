#include "common/kv/parked_pulls.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

int64_t ParkedPulls::Remove(const std::function<bool(const ParkedPull&)>& leave,
                            const std::function<void(const ParkedPull&)>& fail) {
  if (pulls_.empty()) return 0;
  // Stable: the pulls that stay keep their order, and those leaving are answered in theirs.
  auto gone = std::stable_partition(pulls_.begin(), pulls_.end(), [&leave](const ParkedPull& p) { return !leave(p); });
  for (auto it = gone; it != pulls_.end(); ++it) fail(*it);
  const int64_t n = pulls_.end() - gone;
  pulls_.erase(gone, pulls_.end());
  return n;
}

int64_t ParkedPulls::TakeReady(int64_t version, const std::function<void(const ParkedPull&)>& answer) {
  return Remove([version](const ParkedPull& p) { return p.min_version <= version; }, answer);
}

int64_t ParkedPulls::Drop(const std::function<bool(const ParkedPull&)>& match, const absl::Status& why,
                          int64_t version) {
  return Remove(match, [&why, version](const ParkedPull& p) { p.done(why, PullAnswer{version}); });
}

int64_t ParkedPulls::FailAll(const absl::Status& why, int64_t version) {
  return Drop([](const ParkedPull&) { return true; }, why, version);
}

int64_t ParkedPulls::Expire(absl::Time now, int64_t step, uint64_t key,
                            const std::function<std::string()>& waiting_for) {
  std::string why;  // built once, only if a pull expires
  return Remove([now](const ParkedPull& p) { return p.deadline <= now; },
                [&](const ParkedPull& p) {
                  if (why.empty()) why = absl::StrCat("step ", step, " key ", key, ": waiting for ", waiting_for());
                  p.done(absl::DeadlineExceededError(
                             absl::StrCat(why, "; worker ", p.worker_rank, "'s pull of version ", p.min_version,
                                          " timed out after ", absl::ToInt64Seconds(now - p.parked_at), " s")),
                         PullAnswer{step});
                });
}

}  // namespace dtrain::kv
