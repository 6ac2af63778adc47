#include "common/kv/stall_report.h"

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

void StallReport::Add(int64_t step, uint64_t key, const std::vector<int>& missing) {
  Stall& st = steps_[step];
  if (st.num_keys++ == 0) {
    st.first_key = key;
    st.missing.assign(num_workers_, false);
  }
  for (int w : missing) st.missing[w] = true;
}

std::vector<std::string> StallReport::Lines(const HeardFrom& heard, absl::Time now) const {
  std::vector<std::string> lines;
  for (const auto& [step, st] : steps_) {
    std::vector<int> missing;
    for (int w = 0; w < static_cast<int>(st.missing.size()); ++w) {
      if (st.missing[w]) missing.push_back(w);
    }
    lines.push_back(absl::StrCat("step ", step, " key ", st.first_key,
                                 st.num_keys > 1 ? absl::StrCat(" (+", st.num_keys - 1, " more keys)") : "",
                                 ": still waiting for ", heard.Texts(missing, now)));
  }
  return lines;
}

}  // namespace dtrain::kv
