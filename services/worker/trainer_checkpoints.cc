#include "services/worker/trainer_checkpoints.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_set.h"
#include "common/log.h"
#include "common/metrics/metrics_csv.h"
#include "common/models/network_spec.h"
#include "common/status_macros.h"

namespace dtrain::worker {
namespace {

std::string Paths(const std::vector<checkpoint::CheckpointFile>& files) {
  constexpr size_t kShown = 6;
  std::vector<std::string> shown;
  for (size_t i = 0; i < files.size() && i < kShown; ++i) shown.push_back(files[i].path);
  std::string out = absl::StrJoin(shown, ", ");
  if (files.size() > kShown) absl::StrAppend(&out, " and ", files.size() - kShown, " more");
  return out;
}

absl::Status RemoveAll(const std::vector<checkpoint::CheckpointFile>& files) {
  for (const auto& f : files) {
    std::error_code ec;
    std::filesystem::remove(f.path, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("--overwrite-checkpoints: cannot remove ", f.path, ": ", ec.message()));
    }
  }
  if (!files.empty()) DTRAIN_LOG(WARNING) << "--overwrite-checkpoints: removed " << Paths(files);
  return absl::OkStatus();
}

}  // namespace

checkpoint::RunRecord RunRecordFor(const TrainOptions& o, int num_workers, std::string run_id) {
  checkpoint::RunRecord r;
  r.run_id = std::move(run_id);
  r.network = o.network;
  r.hidden = o.network_spec.hidden;
  r.kv_store = KVStoreModeName(o.mode);
  r.num_workers = num_workers;
  r.batch_size = o.batch_size;
  r.num_examples = o.num_examples;
  r.seed = o.seed;
  return r;
}

absl::Status CheckResumeMatches(const std::string& states_path, const std::optional<checkpoint::RunRecord>& saved,
                                const checkpoint::RunRecord& requested) {
  if (!saved) {
    DTRAIN_LOG(WARNING) << states_path
                        << " predates run records: cannot check that --kv-store, --batch-size, the worker count, "
                           "--num-examples and --seed match the run that saved it";
    return absl::OkStatus();
  }
  std::vector<std::string> diffs;
  auto cmp = [&](const char* what, const auto& was, const auto& now) {
    if (was != now) diffs.push_back(absl::StrCat(what, " ", was, " (saved) vs ", now, " (requested)"));
  };
  cmp("--network", saved->network, requested.network);
  // A record from before the field has none: its mlp had the default widths.
  auto widths = [](const checkpoint::RunRecord& r) {
    return r.network == "mlp" && r.hidden.empty() ? models::DefaultMlpHidden() : r.hidden;
  };
  cmp("--hidden", models::HiddenText(widths(*saved)), models::HiddenText(widths(requested)));
  cmp("--kv-store", saved->kv_store, requested.kv_store);
  cmp("workers", saved->num_workers, requested.num_workers);
  cmp("--batch-size", saved->batch_size, requested.batch_size);
  cmp("--num-examples", saved->num_examples, requested.num_examples);
  cmp("--seed", saved->seed, requested.seed);
  if (diffs.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      states_path, " was saved by run ", saved->run_id, " with other settings: ", absl::StrJoin(diffs, "; "),
      ". A resume continues that run exactly only with its settings: use them, or train afresh under another "
      "--model-prefix"));
}

absl::Status SweepCheckpointTemps(const TrainOptions& o) {
  DTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> swept, checkpoint::SweepStaleTempFiles(o.model_prefix));
  for (const std::string& path : swept) {
    DTRAIN_LOG(WARNING) << "removed " << path << ", left by a writer that no longer runs";
  }
  return absl::OkStatus();
}

std::string RunIdOfPredecessor(const TrainOptions& o, const std::string& fallback) {
  absl::StatusOr<checkpoint::SymbolInfo> sym = checkpoint::ReadSymbol(o.model_prefix);
  if (!sym.ok() || sym->run_id.empty()) return fallback;
  return sym->run_id;
}

absl::Status PrepareCheckpointPrefix(const TrainOptions& o) {
  DTRAIN_RETURN_IF_ERROR(SweepCheckpointTemps(o));
  DTRAIN_ASSIGN_OR_RETURN(const std::vector<checkpoint::CheckpointFile> files,
                          checkpoint::ListCheckpointFiles(o.model_prefix));
  std::vector<checkpoint::CheckpointFile> later;  // epochs after the one we start from
  int newest = 0;
  for (const auto& f : files) {
    newest = std::max(newest, f.epoch);
    if (f.epoch > o.load_epoch) later.push_back(f);
  }
  if (later.empty()) return absl::OkStatus();
  if (o.overwrite_checkpoints) {
    if (o.load_epoch == 0) {
      // The old run's epoch rows would read as this run's.
      std::error_code ec;
      if (std::filesystem::remove(metrics::MetricsCsvPath(o.model_prefix), ec)) {
        DTRAIN_LOG(WARNING) << "--overwrite-checkpoints: removed " << metrics::MetricsCsvPath(o.model_prefix);
      }
    }
    return RemoveAll(later);
  }
  if (o.load_epoch == 0) {
    return absl::FailedPreconditionError(absl::StrCat("--model-prefix ", o.model_prefix,
                                                      " already holds checkpoints of another run: ", Paths(later),
                                                      ". Resume it with --load-epoch ", newest,
                                                      ", choose another --model-prefix, or pass "
                                                      "--overwrite-checkpoints to delete them and start over"));
  }
  return absl::FailedPreconditionError(absl::StrCat("resuming ", o.model_prefix, " from epoch ", o.load_epoch,
                                                    " would mix with the later epochs already there: ", Paths(later),
                                                    ". Resume from --load-epoch ", newest,
                                                    ", or pass --overwrite-checkpoints to delete them "
                                                    "and continue from epoch ",
                                                    o.load_epoch));
}

}  // namespace dtrain::worker
