#include "services/worker/trainer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <tuple>

#include <torch/torch.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/metrics/metrics_csv.h"
#include "common/status_macros.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/safetensors.h"
#include "common/kv/finite_check.h"
#include "services/worker/cluster_recovery.h"
#include "services/worker/dataset.h"
#include "services/worker/early_pushes.h"
#include "services/worker/cluster_elastic.h"
#include "services/worker/elastic_data.h"
#include "services/worker/elastic_resume.h"
#include "services/worker/elastic_steps.h"
#include "services/worker/epoch_spans.h"
#include "services/worker/lazy_pulls.h"
#include "services/worker/step_plan.h"
#include "common/data/dataset.h"
#include "common/models/model_state.h"
#include "common/models/models.h"
#include "services/worker/trainer_checkpoints.h"
#include "services/worker/trainer_eval.h"
#include "services/worker/trainer_lr_log.h"
#include "services/worker/trainer_replicas.h"
#include "services/worker/training_monitor.h"

namespace dtrain::worker {
namespace {

// Batch-norm statistics are recomputed at each epoch's end on the first this many
// training images (every worker the same ones), in batches of kCalibrationBatch.
constexpr int64_t kCalibrationImages = 2000;
constexpr int64_t kCalibrationBatch = 200;

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

// "0:25", "12:05", "1:02:09": an ETA, to the second.
std::string EtaText(double seconds) {
  const int64_t s = std::max<int64_t>(0, std::llround(seconds));
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

// Parameters and float buffers (batch-norm statistics, input normalisation): models::CheckpointTensors.
std::vector<checkpoint::NamedTensor> ShapesOf(models::Network& net) {
  std::vector<checkpoint::NamedTensor> out;
  for (const auto& [name, t] : models::CheckpointTensors(net)) out.push_back({name, t.sizes().vec(), {}});
  return out;
}

std::vector<checkpoint::NamedTensor> WeightsOf(models::Network& net) {
  std::vector<checkpoint::NamedTensor> out;
  for (const auto& [name, value] : models::CheckpointTensors(net)) {
    torch::Tensor t = value.detach().contiguous();
    out.push_back({name, t.sizes().vec(), std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel())});
  }
  return out;
}

uint64_t Fnv1a(models::Network& net) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto& [name, p] : models::CheckpointTensors(net)) {
    const auto* b = reinterpret_cast<const unsigned char*>(p.data_ptr<float>());
    for (int64_t i = 0; i < p.numel() * static_cast<int64_t>(sizeof(float)); ++i) {
      h = (h ^ b[i]) * 1099511628211ULL;
    }
  }
  return h;
}

// Loads PREFIX-N.states into *states, after checking that it was saved by a run with
// this one's settings (`requested`), and PREFIX-N.params into the model.
absl::Status LoadCheckpoint(const TrainOptions& o, const checkpoint::RunRecord& requested, models::Network& net,
                            checkpoint::OptimizerStates* states) {
  const int epoch = static_cast<int>(o.load_epoch);
  const std::string states_path = checkpoint::StatesPath(o.model_prefix, epoch);
  DTRAIN_ASSIGN_OR_RETURN(*states, checkpoint::ReadStates(states_path));
  DTRAIN_RETURN_IF_ERROR(CheckResumeMatches(states_path, states->run, requested));
  const std::string params_path = checkpoint::ParamsPath(o.model_prefix, epoch);
  DTRAIN_ASSIGN_OR_RETURN(std::vector<checkpoint::NamedTensor> loaded, checkpoint::ReadParams(params_path));
  DTRAIN_RETURN_IF_ERROR(checkpoint::CheckParamsMatch(params_path, loaded, ShapesOf(net)));
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& [name, t] : models::CheckpointTensors(net)) {
    std::memcpy(t.data_ptr<float>(), loaded[i++].data.data(), sizeof(float) * t.numel());
  }
  return absl::OkStatus();
}

absl::Status SaveCheckpoint(const TrainOptions& o, const checkpoint::RunRecord& run, models::Network& net, KVStore& kv,
                            int epoch) {
  DTRAIN_ASSIGN_OR_RETURN(checkpoint::OptimizerStates states, kv.SaveStates());
  states.run = run;
  const std::string params_path = checkpoint::ParamsPath(o.model_prefix, epoch);
  // States first: a .params file is the marker of a complete epoch.
  DTRAIN_RETURN_IF_ERROR(checkpoint::WriteStates(checkpoint::StatesPath(o.model_prefix, epoch), states));
  const std::vector<checkpoint::NamedTensor> weights = WeightsOf(net);
  DTRAIN_RETURN_IF_ERROR(checkpoint::WriteParams(params_path, weights));
  DTRAIN_LOG(INFO) << "Saved checkpoint to \"" << params_path << "\"";
  if (o.save_safetensors) {
    // After the .params: that file stays the marker of a complete epoch.
    const std::string path = checkpoint::SafetensorsPath(o.model_prefix, epoch);
    DTRAIN_RETURN_IF_ERROR(checkpoint::WriteSafetensors(
        path, weights, {{"format", "pt"}, {"network", o.network}, {"epoch", std::to_string(epoch)}}));
    DTRAIN_LOG(INFO) << "Saved safetensors to \"" << path << "\"";
  }
  return absl::OkStatus();
}

// The training and test data, this rank's share of the training set.
struct Data {
  TensorSet train;
  TensorSet test;
  int64_t batches = 0;                   // per epoch
  std::vector<int64_t> input_shape;      // without batch: {channels, rows, cols}
  std::vector<std::string> class_names;  // one per class: their number is the output layer's width
  torch::Tensor mean, std;               // per channel, of the training images used (every worker the same)
  torch::Tensor calibration;             // the first training images (every worker the same): RecalibrateBatchNorm's
  bool augment = false;
};

// `elastic`: the whole training set is kept (ElasticSteps picks each step's examples
// from it) and every worker validates on the whole test set (the workers change).
absl::StatusOr<Data> LoadData(const TrainOptions& o, int rank, int workers, bool elastic) {
  DTRAIN_ASSIGN_OR_RETURN(data::Dataset set, data::LoadDataset(o.data_dir));
  Data d;
  const TensorSet all = ToTensors(set.train, o.num_examples);
  std::tie(d.mean, d.std) = ChannelStats(all.images);
  d.calibration = all.images.narrow(0, 0, std::min(kCalibrationImages, all.size())).clone();
  d.train = elastic ? all : Partition(all, rank, workers);
  // Each worker evaluates its part; ValidateEpoch combines them.
  d.test = EvalPart(ToTensors(set.test, o.num_test_examples), elastic ? 0 : rank, elastic ? 1 : workers);
  // An elastic job's epochs start this long (its first generation is the -n workers).
  d.batches = d.train.size() / (elastic ? workers : 1) / o.batch_size;
  d.input_shape = {set.train.channels, set.train.rows, set.train.cols};
  d.class_names = std::move(set.class_names);
  d.augment = o.augment == "on" || (o.augment == "auto" && set.format == "cifar10");
  DTRAIN_LOG(INFO) << o.data_dir << ": " << set.format << ", " << set.train.count << " training and " << set.test.count
                   << " test images of " << absl::StrJoin(d.input_shape, "x") << ", " << d.class_names.size()
                   << " classes from " << set.classes_from << (d.augment ? "; random crop and flip" : "");
  if (d.batches == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--num-examples ", o.num_examples, " over ", workers,
                                                   " workers leaves ", d.train.size(),
                                                   " examples per worker, fewer than --batch-size ", o.batch_size));
  }
  return d;
}

// The optimizer and starting version every key is initialised with.
KVStoreInit MakeInit(const TrainOptions& o, int64_t batches, int workers) {
  const bool async = IsAsync(o.mode);
  // Updates per epoch as each key counts them: async servers count every worker's push.
  const int64_t updates_per_epoch = batches * (async ? workers : 1);
  KVStoreInit init;
  init.optimizer.name = o.optimizer;
  init.optimizer.learning_rate = o.lr;
  init.optimizer.momentum = o.mom;
  init.optimizer.weight_decay = o.wd;
  init.optimizer.lr_factor = o.lr_factor;
  // Async servers apply every worker's push on its own: scaling each by 1/W makes a
  // round of W pushes move the weights as far as one sync step (averaged) does, so the
  // same --lr and --mom are stable in both modes.
  init.optimizer.rescale_grad = async ? 1.0 / workers : 1.0;
  for (int64_t e : o.lr_step_epoch_list) init.optimizer.lr_steps.push_back(e * updates_per_epoch);
  init.start_version = o.load_epoch * batches;
  return init;
}

// Sync keys count one update per step: a checkpoint resumed with another batch size,
// example count or worker count would put every key at the wrong version.
absl::Status CheckResumedVersions(const TrainOptions& o, const checkpoint::OptimizerStates& states, int64_t batches,
                                  int64_t start_version) {
  if (IsAsync(o.mode)) return absl::OkStatus();
  for (const auto& k : states.keys) {
    if (k.version == start_version) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        checkpoint::StatesPath(o.model_prefix, static_cast<int>(o.load_epoch)), ": key ", k.key, " was saved after ",
        k.version, " updates, but epoch ", o.load_epoch, " x ", batches, " batches is ", start_version,
        ": --batch-size, --num-examples or the worker count differ from the run that saved it"));
  }
  return absl::OkStatus();
}

std::vector<ParamRef> ParamRefsOf(models::Network& net) {
  std::vector<ParamRef> refs;
  for (const auto& p : net.named_parameters()) {
    refs.push_back({p.key(), p.value().sizes().vec(), p.value().data_ptr<float>(), p.value().numel()});
  }
  return refs;
}

absl::Status WriteSymbolFile(const TrainOptions& o, const Data& data, const std::string& run_id) {
  const std::filesystem::path dir = std::filesystem::path(o.model_prefix).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  checkpoint::SymbolInfo sym{o.network,        static_cast<int>(data.class_names.size()),
                             data.input_shape, data.class_names,
                             run_id,           o.network_spec.hidden};
  sym.num_layers = o.network_spec.num_layers;
  return checkpoint::WriteSymbol(o.model_prefix, sym);
}

// A step whose loss or gradients are not finite stops training here, before the push:
// NaN pushed to the servers poisons every key it touches, and the job would end
// "successfully" with a useless model. INTERNAL naming the step, rank and tensors.
// Reads the gradients in place (the server's vectorised check), no tensor allocated per step.
absl::Status CheckFinite(const TrainOptions& o, int64_t step, int rank, double loss, models::Network& net,
                         bool pushed_early) {
  std::vector<std::string> bad;
  for (const auto& p : net.named_parameters()) {
    const torch::Tensor& g = p.value().grad();
    if (g.defined() && !kv::AllFinite(g.data_ptr<float>(), g.numel())) bad.push_back(p.key());
  }
  if (std::isfinite(loss) && bad.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat(
      "step %d on rank %d: training diverged: loss %g, non-finite gradients in %s; %s. Lower --lr (%g) or check "
      "the data",
      step, rank, loss, bad.empty() ? std::string("none") : absl::StrJoin(bad, ", "),
      pushed_early ? "only the finite gradients were pushed (--overlap)" : "nothing was pushed for this step", o.lr));
}

// MXNet's Speedometer line after `batches_done` batches of the epoch, then where the
// epoch is and when it and the run end at the window's pace (validation and
// checkpoints not counted).
void LogSpeed(const TrainOptions& o, int64_t epoch, int64_t batches_done, int64_t batches,
              const TrainingMonitor::Figures& w) {
  const double per_batch = w.seconds / static_cast<double>(std::max<int64_t>(1, w.samples / o.batch_size));
  const double epoch_left = per_batch * static_cast<double>(batches - batches_done);
  const double run_left = epoch_left + per_batch * static_cast<double>(batches * (o.num_epochs - epoch - 1));
  DTRAIN_LOG(INFO) << absl::StrFormat(
      "Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-accuracy=%f\tTrain-cross-entropy=%f\tbatch %d/%d"
      "\teta %s (epoch), %s (run)",
      epoch, batches_done, w.samples_per_sec, w.accuracy, w.loss, batches_done, batches, EtaText(epoch_left),
      EtaText(run_left));
}

// One epoch's steps from batch `span.first_batch` (0 but in a rejoining worker or a
// redo): forward, backward, PushPull, progress lines. `pick` gives each step's examples
// (indices into data.train): the batch order depends only on (seed, epoch, rank), so a
// replacement starting mid-epoch sees the same batches as the dead worker.
// With `replicas` (--gpus, --cpu-replicas) they compute the step's gradients into the
// host model's, which are pushed as the host model's own are; after each pull the
// replicas get the new weights. Communication does not overlap computation then.
absl::Status RunEpoch(const TrainOptions& o, const EpochSpan& span, const PickBatch& pick, int rank, const Data& data,
                      models::Network& net, DeviceReplicas* replicas, KVStore& kv, TrainingMonitor& monitor,
                      const LrChangeLog& lr_log) {
  const int64_t epoch = span.epoch;
  std::vector<torch::Tensor> params = net.parameters();
  std::vector<const float*> grads(params.size());
  const absl::Duration step_timeout = absl::Seconds(o.sync_timeout_s);
  // The host weights may have changed since the replicas last saw them: the first pull,
  // a resume, a rollback.
  if (replicas != nullptr) DTRAIN_RETURN_IF_ERROR(replicas->LoadWeights(absl::Now() + step_timeout));
  // --overlap: each step opened before backward (KVStore::BeginStep), its gradients
  // offered from backward, its handle held until the next forward has used its weights.
  std::optional<EarlyPushes> early;
  std::optional<LazyPulls> lazy;  // its destructor ends a step still pending
  if (o.overlap && replicas == nullptr) {
    early.emplace(params);
    lazy.emplace(net);
  }
  for (int64_t b = span.first_batch; b < span.batches; ++b) {
    const absl::Time step_start = absl::Now();
    const int64_t step = span.first_step + b;
    DTRAIN_ASSIGN_OR_RETURN(const torch::Tensor idx, pick(step, b));
    auto x = data.train.images.index_select(0, idx);
    if (data.augment) x = AugmentBatch(x, /*pad=*/4, o.seed, epoch, rank, b);
    auto y = data.train.labels.index_select(0, idx);
    if (replicas != nullptr) {
      if (const std::string line = lr_log.LineForStep(step); !line.empty()) DTRAIN_LOG(INFO) << line;
      DTRAIN_ASSIGN_OR_RETURN(const DeviceReplicas::StepResult r, replicas->Step(x, y, absl::Now() + step_timeout));
      for (size_t i = 0; i < params.size(); ++i) grads[i] = params[i].grad().data_ptr<float>();
      const double compute_s = Seconds(step_start);
      DTRAIN_RETURN_IF_ERROR(CheckFinite(o, step, rank, r.loss, net, /*pushed_early=*/false));
      DTRAIN_RETURN_IF_ERROR(kv.PushPull(step, grads));
      DTRAIN_RETURN_IF_ERROR(replicas->LoadWeights(absl::Now() + step_timeout));
      monitor.StepDone(step, o.batch_size, r.loss, r.correct, compute_s);
    } else {
      net.zero_grad(/*set_to_none=*/true);
      auto logits = net.forward(x);
      // The previous step's weights all in (most arrived while forward ran); its error.
      if (lazy) DTRAIN_RETURN_IF_ERROR(lazy->Finish());
      auto loss = torch::nn::functional::cross_entropy(logits, y);
      if (const std::string line = lr_log.LineForStep(step); !line.empty()) DTRAIN_LOG(INFO) << line;
      std::unique_ptr<OpenStep> open;  // --overlap: the step its gradients are offered to
      if (early) {
        open = kv.BeginStep(step);
        early->Begin(*open);
      }
      loss.backward();
      const absl::Status offered = early ? early->End() : absl::OkStatus();
      for (size_t i = 0; i < params.size(); ++i) grads[i] = params[i].grad().data_ptr<float>();
      const double compute_s = Seconds(step_start) - (lazy ? lazy->TakeGateSeconds() : 0.0);
      const double loss_value = loss.item<double>();
      DTRAIN_RETURN_IF_ERROR(CheckFinite(o, step, rank, loss_value, net, open != nullptr && open->pushes_early()));
      DTRAIN_RETURN_IF_ERROR(offered);
      if (open != nullptr) {
        DTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PendingStep> pending, open->Send(grads));
        DTRAIN_RETURN_IF_ERROR(lazy->Hold(step, std::move(pending), params));
      } else {
        DTRAIN_RETURN_IF_ERROR(kv.PushPull(step, grads));
      }

      const int64_t correct = logits.argmax(1).eq(y).sum().item<int64_t>();
      monitor.StepDone(step, o.batch_size, loss_value, correct, compute_s);
    }
    if ((b + 1) % o.disp_batches == 0) LogSpeed(o, epoch, b + 1, span.batches, monitor.TakeWindow());
  }
  if (lazy) DTRAIN_RETURN_IF_ERROR(lazy->Finish());
  return absl::OkStatus();
}

// The network for the data's shape and classes, and its device replicas (--gpus,
// --cpu-replicas; null: none).
struct Model {
  std::shared_ptr<models::Network> net;
  std::unique_ptr<DeviceReplicas> replicas;
};

absl::StatusOr<Model> BuildModel(const TrainOptions& o, const Data& data, WorkerDevices devices) {
  torch::manual_seed(o.seed);
  Model m;
  DTRAIN_ASSIGN_OR_RETURN(
      m.net, models::CreateNetwork(o.network_spec, static_cast<int>(data.class_names.size()), data.input_shape));
  m.net->SetInputNormalization(data.mean, data.std);
  // Before the checkpoint is loaded and the kvstore keeps pointers to the weights: the
  // replicas may move them into pinned memory.
  DTRAIN_ASSIGN_OR_RETURN(m.replicas, PlaceReplicas(o.network_spec, static_cast<int>(data.class_names.size()),
                                                    data.input_shape, *m.net, std::move(devices)));
  if (m.replicas != nullptr && o.overlap && IsDistributed(o.mode)) {
    DTRAIN_LOG(INFO) << "--overlap does not apply to model replicas: each step pushes after the replicas' "
                        "gradients are summed, and pulls before the next";
  }
  return m;
}

// What the run is and what the kvstore starts from: the checkpoint prefix made ready
// (worker 0), a checkpoint loaded (--load-epoch), the run's id, the kvstore
// initialised, the symbol file written (worker 0).
struct RunStart {
  bool writes_files = false;
  KVStoreInit init;
  checkpoint::OptimizerStates states;
  checkpoint::RunRecord run;
};

absl::Status StartRun(const TrainOptions& o, Cluster& cluster, const Data& data, models::Network& net, KVStore& kv,
                      RunStart* s) {
  s->writes_files = cluster.rank() == 0 && !o.model_prefix.empty();
  // A rejoined worker 0 continues its predecessor's run: the checkpoints there are its own.
  const ClusterRecovery* recovery = cluster.recovery();
  const bool rejoined = recovery != nullptr && recovery->rejoined();
  if (s->writes_files) DTRAIN_RETURN_IF_ERROR(rejoined ? SweepCheckpointTemps(o) : PrepareCheckpointPrefix(o));
  s->init = MakeInit(o, data.batches, cluster.num_workers());
  // An elastic job's record holds the workers it first started with, which a resume
  // keeps (its schedule starts with the saved one's past), and its epochs have the
  // lengths its membership gave them.
  std::optional<elastic::MembershipSchedule> schedule;
  if (cluster.elastic() != nullptr) schedule = cluster.elastic()->membership().schedule;
  s->run = RunRecordFor(
      o, schedule ? static_cast<int>(schedule->generations().front().ranks.size()) : cluster.num_workers(), "");
  if (schedule && !o.lr_step_epoch_list.empty()) {
    s->init.optimizer.lr_steps.clear();
    s->init.epoch_lr = {data.train.size(), o.batch_size, o.lr_step_epoch_list};
  }
  if (o.load_epoch > 0 && schedule) {
    DTRAIN_ASSIGN_OR_RETURN(s->init.start_version, ElasticResumeStep(o.model_prefix, o.load_epoch, o.seed,
                                                                     data.train.size(), o.batch_size, *schedule));
  }
  if (o.load_epoch > 0) {
    DTRAIN_RETURN_IF_ERROR(LoadCheckpoint(o, s->run, net, &s->states));
    // A resume continues its run; a file from before run ids starts a new one.
    s->run.run_id = s->states.run ? s->states.run->run_id : checkpoint::NewRunId();
    DTRAIN_RETURN_IF_ERROR(CheckResumedVersions(o, s->states, data.batches, s->init.start_version));
    s->init.resume = &s->states;
    DTRAIN_LOG(INFO) << "resuming from epoch " << o.load_epoch << " of " << o.model_prefix;
  } else {
    s->run.run_id = checkpoint::NewRunId();
  }
  if (s->writes_files && rejoined) s->run.run_id = RunIdOfPredecessor(o, s->run.run_id);
  DTRAIN_RETURN_IF_ERROR(kv.Init(ParamRefsOf(net), s->init));
  if (s->writes_files) DTRAIN_RETURN_IF_ERROR(WriteSymbolFile(o, data, s->run.run_id));
  return absl::OkStatus();
}

// A replacement whose first step opens an epoch (StepPlan::redo_epoch_end): the
// weights just pulled are the previous epoch's end, so its batch-norm statistics are
// recomputed, worker 0 saves its checkpoint again if it was not completed (exactly:
// nobody can move on without this worker's next push), and this rank's part of its
// validation, which the others may wait for, is evaluated again (the same figures;
// training time unknown here: 0).
absl::Status RedoEpochEnd(const TrainOptions& o, const StepPlan& plan, const RunStart& start, const Data& data,
                          models::Network& net, KVStore& kv, Cluster& cluster, absl::Duration gather_timeout) {
  // Epoch first_epoch - 1 ended; its checkpoint is numbered first_epoch (MXNet's
  // PREFIX-NNNN counts the epochs done).
  const int64_t checkpoint_number = plan.first_epoch;
  models::RecalibrateBatchNorm(net, data.calibration, kCalibrationBatch);
  if (start.writes_files &&
      !std::filesystem::exists(checkpoint::ParamsPath(o.model_prefix, static_cast<int>(checkpoint_number)))) {
    DTRAIN_LOG(WARNING) << "the checkpoint of epoch " << checkpoint_number << " was not completed: saving it again";
    DTRAIN_RETURN_IF_ERROR(SaveCheckpoint(o, start.run, net, kv, static_cast<int>(checkpoint_number)));
  }
  return ValidateEpoch(net, data.test, cluster, plan.first_epoch - 1, 0, 0, gather_timeout).status();
}

// An elastic job's checkpoint at the end of an epoch (whose first next step is `next`):
// written by the lowest rank of the workers at the end (worker 0 unless it left),
// membership first (a checkpoint whose .params exist is complete), in the run the job
// started (the symbol file's id: a joiner's own start knew none).
absl::Status SaveElasticCheckpoint(const TrainOptions& o, const checkpoint::RunRecord& run, const ElasticSteps& steps,
                                   int writer, int64_t next, models::Network& net, KVStore& kv, int number) {
  if (o.model_prefix.empty() || writer != steps.rank()) return absl::OkStatus();
  DTRAIN_RETURN_IF_ERROR(SaveCheckpointMembership(o.model_prefix, number, steps.plan().schedule(), next));
  checkpoint::RunRecord mine = run;
  if (steps.rank() != 0) mine.run_id = RunIdOfPredecessor(o, run.run_id);
  return SaveCheckpoint(o, mine, net, kv, number);
}

// After an epoch's last step: the job-wide barrier of the epoch (Settle), its log lines,
// the batch-norm statistics of its weights, worker 0's checkpoint, the validation
// (this rank's part, combined through the scheduler; an elastic job's whole test set on each
// worker, its job-wide line from the data plan: `steps`, null for a fixed job) and the CSV line.
absl::Status EndEpoch(const TrainOptions& o, const EpochSpan& span, absl::Time epoch_start, const RunStart& start,
                      const Data& data, models::Network& net, KVStore& kv, Cluster& cluster, TrainingMonitor& monitor,
                      absl::Duration gather_timeout, const ElasticSteps* steps, TrainResult* result) {
  const int64_t epoch = span.epoch;
  DTRAIN_RETURN_IF_ERROR(kv.Settle(span.first_step + span.batches));
  const double train_s = Seconds(epoch_start);
  const TrainingMonitor::Figures ep = monitor.Epoch();
  result->samples += ep.samples;
  result->train_seconds += train_s;
  DTRAIN_LOG(INFO) << absl::StrFormat("Epoch[%d] Train-accuracy=%f", epoch, ep.accuracy);
  DTRAIN_LOG(INFO) << absl::StrFormat("Epoch[%d] Train-cross-entropy=%f", epoch, ep.loss);
  DTRAIN_LOG(INFO) << absl::StrFormat("Epoch[%d] Time cost=%.3f", epoch, train_s);
  // The epoch's weights decide the batch-norm statistics that validation, the
  // checkpoint and inference use (model_state.h: the same on every worker and run).
  // Like validation, not counted in the epoch's training time.
  models::RecalibrateBatchNorm(net, data.calibration, kCalibrationBatch);
  std::optional<EpochTally> tally;
  if (steps != nullptr) {
    DTRAIN_ASSIGN_OR_RETURN(tally, TallyEpoch(steps->plan(), o.batch_size, span.first_step));
  }
  if (tally) {
    DTRAIN_RETURN_IF_ERROR(SaveElasticCheckpoint(o, start.run, *steps, tally->lowest_rank_at_end,
                                                 span.first_step + span.batches, net, kv, static_cast<int>(epoch + 1)));
  } else if (start.writes_files) {
    DTRAIN_RETURN_IF_ERROR(SaveCheckpoint(o, start.run, net, kv, static_cast<int>(epoch + 1)));
  }
  DTRAIN_ASSIGN_OR_RETURN(const Validation v, ValidateEpoch(net, data.test, cluster, epoch, ep.samples, train_s,
                                                            gather_timeout, /*job_line=*/steps == nullptr));
  result->validation_accuracy = v.accuracy;
  if (tally && tally->lowest_rank_at_end == steps->rank()) {
    DTRAIN_LOG(INFO) << ElasticEpochLine(epoch, tally->workers_at_end, tally->samples, train_s, data.test.size());
  }
  // The CSV is for people and plots: failing to write it is no reason to stop training.
  if (absl::Status s = monitor.EpochDone(train_s, result->validation_accuracy); !s.ok()) {
    DTRAIN_LOG(WARNING) << "epoch figures not saved: " << s.message();
  }
  return absl::OkStatus();
}

// Where the epochs start (StepPlan): a fresh run, --load-epoch, or a replacement of a
// dead worker at the step the servers say is unfinished, whose epoch end is redone
// first where that step opens an epoch.
absl::StatusOr<StepPlan> PlanStart(const TrainOptions& o, const RunStart& start, const Data& data, models::Network& net,
                                   KVStore& kv, Cluster& cluster) {
  Recovery* const recovery = kv.recovery();
  const StepPlan plan = PlanSteps(o.load_epoch, recovery != nullptr ? recovery->resume_step() : -1, data.batches);
  if (plan.resume_step >= 0) {
    DTRAIN_LOG(INFO) << "resuming at epoch " << plan.first_epoch << " batch " << plan.first_batch << " (step "
                     << plan.resume_step << ")";
  }
  if (plan.redo_epoch_end) {
    DTRAIN_RETURN_IF_ERROR(RedoEpochEnd(o, plan, start, data, net, kv, cluster, absl::Seconds(o.sync_timeout_s)));
  }
  return plan;
}

// An elastic job's --lr-step-epochs, which the servers apply by epoch: the line when the
// rate changes at the start of `span`'s epoch.
void LogEpochLrChange(const TrainOptions& o, const RunStart& start, const EpochSpan& span) {
  if (!start.init.epoch_lr.enabled()) return;
  const std::string line =
      LrChangeLog::LineForEpoch(start.init.optimizer, o.lr_step_epoch_list, span.epoch, span.first_step);
  if (!line.empty()) DTRAIN_LOG(INFO) << line;
}

}  // namespace

// As MXNet's fit: the data, the model, the kvstore initialised; then each epoch's steps
// and its end (checkpoint, validation), going back to the servers' snapshot where the
// job was rolled back.
absl::StatusOr<TrainResult> Train(const TrainOptions& o, Cluster& cluster, KVStore& kv, WorkerMetrics* metrics,
                                  WorkerDevices devices) {
  const int rank = cluster.rank();
  ClusterElastic* const elastic_cluster = cluster.elastic();
  DTRAIN_ASSIGN_OR_RETURN(const Data data, LoadData(o, rank, cluster.num_workers(), elastic_cluster != nullptr));
  DTRAIN_ASSIGN_OR_RETURN(Model model, BuildModel(o, data, std::move(devices)));
  models::Network& net = *model.net;
  RunStart start;
  DTRAIN_RETURN_IF_ERROR(StartRun(o, cluster, data, net, kv, &start));
  std::optional<ElasticSteps> steps;  // an elastic job's data plan and generation
  EpochSpan span;
  if (elastic_cluster != nullptr) {
    steps.emplace(rank, o.seed, data.train.size(), o.batch_size, elastic_cluster->membership(), kv.elastic());
    DTRAIN_ASSIGN_OR_RETURN(span, ElasticStart(start.init.start_version, *steps, kv));
  } else {
    DTRAIN_ASSIGN_OR_RETURN(const StepPlan plan, PlanStart(o, start, data, net, kv, cluster));
    span = SpanOf(plan, data.batches);
  }
  // An elastic job's workers change: each validates on the whole test set itself.
  LocalCluster solo;
  Cluster& validation = elastic_cluster != nullptr ? static_cast<Cluster&>(solo) : cluster;

  TrainResult result;
  // The servers apply the learning-rate schedule; the worker says when it changes.
  const LrChangeLog lr_log(start.init.optimizer, IsAsync(o.mode) ? cluster.num_workers() : 1);
  TrainingMonitor monitor(cluster, kv, metrics, start.writes_files ? metrics::MetricsCsvPath(o.model_prefix) : "");
  const absl::Duration gather_timeout = absl::Seconds(o.sync_timeout_s);
  absl::Time epoch_start;
  int64_t started = -1;  // the epoch the monitor counts; a redo in it goes on counting
  // span: the next epoch to run and its first batch (0 but after a resume, rollback or redo).
  while (span.epoch < o.num_epochs) {
    if (span.epoch != started || span.first_batch == 0) {
      epoch_start = absl::Now();
      monitor.StartEpoch(span.epoch);
      started = span.epoch;
      if (steps && span.first_batch == 0) LogEpochLrChange(o, start, span);
    }
    const PickBatch pick =
        steps ? ElasticBatches(*steps) : FixedEpochBatches(data.train.size(), o.batch_size, o.seed, span.epoch, rank);
    const absl::Status ran = RunEpoch(o, span, pick, rank, data, net, model.replicas.get(), kv, monitor, lr_log);
    bool epoch_over = false;
    DTRAIN_RETURN_IF_ERROR(NextSpan(ran, absl::Seconds(o.sync_timeout_s), kv, elastic_cluster,
                                    steps ? &*steps : nullptr, data.batches, &span, &epoch_over, &result.left_at_step));
    if (result.left_at_step >= 0) return result;
    if (!epoch_over) {
      if (IsRollback(ran)) started = -1;  // the rolled-back epoch's figures start again
      continue;
    }
    DTRAIN_RETURN_IF_ERROR(EndEpoch(o, span, epoch_start, start, data, net, kv, validation, monitor, gather_timeout,
                                    steps ? &*steps : nullptr, &result));
    if (steps) {
      DTRAIN_ASSIGN_OR_RETURN(span, steps->SpanFrom(span.first_step + span.batches));
    } else {
      span = SpanOf(StepPlan{span.epoch + 1, 0, -1, false}, data.batches);
    }
  }
  DTRAIN_LOG(INFO) << monitor.StepTimeLine();
  if (const std::optional<std::string> advice = monitor.StallAdvice(o.mode, o.staleness, o.weigh_stale)) {
    DTRAIN_LOG(WARNING) << *advice;
  }
  result.weights_fnv = Fnv1a(net);
  return result;
}

}  // namespace dtrain::worker
