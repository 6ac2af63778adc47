#include "common/elastic/elastic_spec.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace dtrain::elastic {
namespace {

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(std::string(what)); }

}  // namespace

absl::StatusOr<ElasticSpec> ParseElasticBounds(absl::string_view text) {
  ElasticSpec spec;
  if (text.empty()) return spec;
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  int min_workers = 0, max_workers = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &min_workers) || !absl::SimpleAtoi(parts[1], &max_workers)) {
    return Bad(absl::StrCat("--elastic ", text, ": expected MIN:MAX, two worker counts (e.g. 2:4)"));
  }
  if (min_workers < 1) return Bad(absl::StrCat("--elastic ", text, ": MIN must be at least 1, got ", min_workers));
  if (max_workers < min_workers) {
    return Bad(absl::StrCat("--elastic ", text, ": MIN ", min_workers, " is above MAX ", max_workers));
  }
  if (max_workers > kMaxElasticWorkers) {
    return Bad(absl::StrCat("--elastic ", text, ": MAX ", max_workers, " is over the limit ", kMaxElasticWorkers));
  }
  spec.min_workers = min_workers;
  spec.max_workers = max_workers;
  return spec;
}

absl::StatusOr<ElasticLr> ParseElasticLr(absl::string_view text) {
  if (text == "scale") return ElasticLr::kScale;
  if (text == "keep") return ElasticLr::kKeep;
  return Bad(absl::StrCat("--elastic-lr must be scale or keep, got '", text, "'"));
}

absl::string_view ElasticLrName(ElasticLr lr) { return lr == ElasticLr::kKeep ? "keep" : "scale"; }

absl::Status CheckElasticSpec(const ElasticSpec& spec, int64_t num_workers, KVStoreMode mode) {
  if (!spec.enabled()) {
    if (spec.lr != ElasticLr::kScale) return Bad("--elastic-lr needs --elastic MIN:MAX");
    if (!spec.replay_membership.empty()) return Bad("--replay-membership needs --elastic MIN:MAX");
    if (!spec.resume_membership.empty()) return Bad("--resume-membership needs --elastic MIN:MAX");
    return absl::OkStatus();
  }
  if (!spec.replay_membership.empty() && !spec.resume_membership.empty()) {
    return Bad(
        "--replay-membership and --resume-membership together: a replay starts from step 0, a resume from "
        "its checkpoint");
  }
  const std::string bounds = absl::StrCat(spec.min_workers, ":", spec.max_workers);
  if (num_workers > spec.max_workers) {
    return Bad(
        absl::StrCat("--num-workers ", num_workers, " is above --elastic ", bounds, "'s MAX ", spec.max_workers));
  }
  if (num_workers < spec.min_workers) {
    return Bad(
        absl::StrCat("--num-workers ", num_workers, " is below --elastic ", bounds, "'s MIN ", spec.min_workers));
  }
  if (mode != KVStoreMode::kDistSync) {
    return Bad(absl::StrCat("--elastic ", bounds,
                            " needs --kv-store dist_sync (every step merged from one set of "
                            "workers), got ",
                            KVStoreModeName(mode)));
  }
  return absl::OkStatus();
}

double ElasticLrFactor(ElasticLr lr, int workers_now, int64_t workers_at_start) {
  if (lr == ElasticLr::kKeep || workers_at_start <= 0) return 1.0;
  return static_cast<double>(workers_now) / static_cast<double>(workers_at_start);
}

void AddElasticFlags(FlagSet& flags, ElasticSpec* spec) {
  flags.AddParsed("elastic",
                  [spec](const std::string& text) -> absl::Status {
                    DTRAIN_ASSIGN_OR_RETURN(const ElasticSpec bounds, ParseElasticBounds(text));
                    spec->min_workers = bounds.min_workers;
                    spec->max_workers = bounds.max_workers;
                    return absl::OkStatus();
                  },
                  "", "MIN:MAX: workers may join and leave while the job runs, between MIN and MAX (docs/elastic.md)",
                  {"DTRAIN_ELASTIC"});
  AddParsedValue(flags, "elastic-lr", &spec->lr, ParseElasticLr, std::string(ElasticLrName(spec->lr)),
                 "scale: the lr follows the worker count (lr * workers / --num-workers); keep: unchanged");
  flags.AddString("replay-membership", &spec->replay_membership,
                  "a recorded PREFIX-membership.json: joins and leaves are held until their recorded step");
  flags.AddString("resume-membership", &spec->resume_membership,
                  "a checkpoint's PREFIX-NNNN.membership.json: the resumed job starts with its membership "
                  "(dtrain launch passes it by itself for --load-epoch)");
}

}  // namespace dtrain::elastic
