#include "common/kv/heard_from.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::kv {

HeardFrom::HeardFrom(int num_workers) : last_(std::make_unique<std::atomic<int64_t>[]>(num_workers)) {
  for (int w = 0; w < num_workers; ++w) last_[w].store(0);
}

bool HeardFrom::Note(int w, absl::Time now) {
  return last_[w].exchange(absl::ToUnixNanos(now), std::memory_order_relaxed) == 0;
}

std::string HeardFrom::Text(int w, absl::Time now) const {
  const int64_t ns = last_[w].load(std::memory_order_relaxed);
  if (ns == 0) return absl::StrCat("worker ", w, " (never heard from)");
  return absl::StrCat("worker ", w, " (last heard ", absl::ToInt64Seconds(now - absl::FromUnixNanos(ns)), " s ago)");
}

std::string HeardFrom::Texts(const std::vector<int>& workers, absl::Time now) const {
  std::vector<std::string> names;
  names.reserve(workers.size());
  for (int w : workers) names.push_back(Text(w, now));
  return absl::StrJoin(names, ", ");
}

}  // namespace dtrain::kv
