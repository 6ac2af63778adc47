#include "common/kv/shard_snapshot.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/checkpoint/checkpoint_codec.h"
#include "common/file_io.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::kv {
namespace {

using checkpoint::internal::ByteReader;
using checkpoint::internal::PutFloats;
using checkpoint::internal::PutU32;
using checkpoint::internal::PutU64;

constexpr char kSnapshotMagic[] = "DTRNSNP1";
// 1: the first; 2: with StoreConfig::epoch_lr. Both are read.
constexpr uint32_t kSnapshotVersion = 2;
constexpr char kSuffix[] = ".snapshot";
// Bounds on lengths read from a file, so that a corrupt count is refused before it
// drives an allocation (floats are further bounded by the bytes left).
constexpr uint32_t kMaxNameBytes = 256;  // job id (64 in practice), optimizer name
constexpr uint32_t kMaxDims = 32;        // as ShardStore::InitKey
constexpr uint64_t kMaxLrSteps = 4096;
// Far above any shard we hold; only stops a wrong path being slurped.
constexpr size_t kMaxSnapshotBytes = size_t{64} << 30;
// Smallest encoding of one key: key, version, ndim, value count, state count.
constexpr uint64_t kMinKeyRecord = 8 + 8 + 4 + 8 + 8;

void PutF64(std::string* out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutU64(out, bits);
}

void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  *out += s;
}

absl::Status F64(ByteReader& r, const char* what, double* v) {
  uint64_t bits;
  DTRAIN_RETURN_IF_ERROR(r.U64(what, &bits));
  std::memcpy(v, &bits, sizeof bits);
  return absl::OkStatus();
}

absl::Status String(ByteReader& r, const char* what, std::string* s) {
  uint32_t n;
  DTRAIN_RETURN_IF_ERROR(r.U32(what, &n));
  if (n > kMaxNameBytes) return r.Error(absl::StrCat(what, " of ", n, " bytes (max ", kMaxNameBytes, ")"));
  return r.Bytes(what, n, s);
}

void PutConfig(std::string* out, const StoreConfig& c) {
  PutU32(out, c.mode == MergeMode::kSync ? 0 : 1);
  PutU32(out, static_cast<uint32_t>(c.num_workers));
  PutU32(out, c.keep_previous_version ? 1 : 0);
  const OptimizerOptions& o = c.optimizer;
  PutString(out, o.name);
  for (double d : {o.learning_rate, o.momentum, o.weight_decay, o.lr_factor, o.beta1, o.beta2, o.epsilon,
                   o.rescale_grad, o.clip_gradient}) {
    PutF64(out, d);
  }
  PutU64(out, o.lr_steps.size());
  for (int64_t s : o.lr_steps) PutU64(out, static_cast<uint64_t>(s));
  // Version 2: an elastic job's lr schedule in epochs.
  PutU64(out, static_cast<uint64_t>(c.epoch_lr.num_examples));
  PutU64(out, static_cast<uint64_t>(c.epoch_lr.batch_size));
  PutU64(out, c.epoch_lr.epochs.size());
  for (int64_t e : c.epoch_lr.epochs) PutU64(out, static_cast<uint64_t>(e));
}

absl::Status ReadConfig(ByteReader& r, uint32_t version, StoreConfig* c) {
  uint32_t mode, workers, keep;
  DTRAIN_RETURN_IF_ERROR(r.U32("merge mode", &mode));
  if (mode > 1) return r.Error(absl::StrCat("merge mode ", mode, " is not 0 (sync) or 1 (async)"));
  c->mode = mode == 0 ? MergeMode::kSync : MergeMode::kAsync;
  DTRAIN_RETURN_IF_ERROR(r.U32("worker count", &workers));
  if (workers < 1 || workers > (1u << 24)) return r.Error(absl::StrCat("worker count ", workers));
  c->num_workers = static_cast<int>(workers);
  DTRAIN_RETURN_IF_ERROR(r.U32("keep previous version", &keep));
  c->keep_previous_version = keep != 0;
  OptimizerOptions& o = c->optimizer;
  DTRAIN_RETURN_IF_ERROR(String(r, "optimizer name", &o.name));
  for (double* d : {&o.learning_rate, &o.momentum, &o.weight_decay, &o.lr_factor, &o.beta1, &o.beta2, &o.epsilon,
                    &o.rescale_grad, &o.clip_gradient}) {
    DTRAIN_RETURN_IF_ERROR(F64(r, "optimizer option", d));
  }
  uint64_t n;
  DTRAIN_RETURN_IF_ERROR(r.U64("lr step count", &n));
  if (n > kMaxLrSteps) return r.Error(absl::StrCat("lr step count ", n, " (max ", kMaxLrSteps, ")"));
  o.lr_steps.resize(n);
  for (int64_t& s : o.lr_steps) DTRAIN_RETURN_IF_ERROR(r.I64("lr step", &s));
  if (version < 2) return absl::OkStatus();
  DTRAIN_RETURN_IF_ERROR(r.I64("epoch lr examples", &c->epoch_lr.num_examples));
  DTRAIN_RETURN_IF_ERROR(r.I64("epoch lr batch size", &c->epoch_lr.batch_size));
  DTRAIN_RETURN_IF_ERROR(r.U64("epoch lr step count", &n));
  if (n > kMaxEpochLrSteps) return r.Error(absl::StrCat("epoch lr step count ", n, " (max ", kMaxEpochLrSteps, ")"));
  c->epoch_lr.epochs.resize(n);
  for (int64_t& e : c->epoch_lr.epochs) DTRAIN_RETURN_IF_ERROR(r.I64("epoch lr step", &e));
  if (absl::Status s = CheckEpochLrSteps(c->epoch_lr); !s.ok()) return r.Error(std::string(s.message()));
  return absl::OkStatus();
}

// The element count of `shape`, or -1 if it is impossible (negative, overflowing).
int64_t NumElements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return -1;
  }
  return n > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(n);
}

// The step of `name` if it is exactly "server-<rank>-step-<S>.snapshot", else -1.
int64_t StepOfName(const std::string& name, int server_rank) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, absl::StrCat("server-", server_rank, "-step-")) ||
      !absl::ConsumeSuffix(&rest, kSuffix) || rest.empty() ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  int64_t step;
  if (!absl::SimpleAtoi(rest, &step) || absl::StrCat(step) != rest) return -1;  // no leading zeros
  return step;
}

}  // namespace

std::string ShardSnapshotPath(const std::string& dir, int server_rank, int64_t step) {
  return (std::filesystem::path(dir) / absl::StrCat("server-", server_rank, "-step-", step, kSuffix)).string();
}

absl::Status WriteShardSnapshot(const std::string& dir, const ShardSnapshot& snap) {
  const std::string path = ShardSnapshotPath(dir, snap.server_rank, snap.step);
  if (snap.job_id.size() > kMaxNameBytes || snap.config.optimizer.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": job id or optimizer name over ", kMaxNameBytes, " bytes"));
  }
  std::string out = checkpoint::internal::BeginFramedFile(kSnapshotMagic, kSnapshotVersion);
  PutU32(&out, static_cast<uint32_t>(snap.server_rank));
  PutU64(&out, static_cast<uint64_t>(snap.step));
  PutString(&out, snap.job_id);
  PutConfig(&out, snap.config);
  PutU64(&out, snap.keys.size());
  std::set<uint64_t> seen;
  for (const KeyState& k : snap.keys) {
    if (!seen.insert(k.key).second || k.version != snap.step || k.shape.size() > kMaxDims ||
        NumElements(k.shape) != static_cast<int64_t>(k.values.size())) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": key ", k.key, " at version ", k.version,
                                                     " with ", k.values.size(),
                                                     " values is not a unique key of this step with its shape"));
    }
    PutU64(&out, k.key);
    PutU64(&out, static_cast<uint64_t>(k.version));
    PutU32(&out, static_cast<uint32_t>(k.shape.size()));
    for (int64_t d : k.shape) PutU64(&out, static_cast<uint64_t>(d));
    PutU64(&out, k.values.size());
    PutFloats(&out, k.values);
    PutU64(&out, k.optimizer_state.size());
    PutFloats(&out, k.optimizer_state);
  }
  checkpoint::internal::FinishFramedFile(&out);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat("cannot create snapshot directory ", dir, ": ", ec.message()));
  return WriteFileAtomically(path, out);
}

absl::StatusOr<ShardSnapshot> ReadShardSnapshot(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFileLimited(path, kMaxSnapshotBytes));
  uint32_t version = 0;
  DTRAIN_ASSIGN_OR_RETURN(ByteReader r, checkpoint::internal::OpenFramedFile(path, bytes, kSnapshotMagic, "snapshot",
                                                                             kSnapshotVersion, &version));
  ShardSnapshot snap;
  uint32_t rank;
  uint64_t count;
  DTRAIN_RETURN_IF_ERROR(r.U32("server rank", &rank));
  snap.server_rank = static_cast<int>(rank);
  DTRAIN_RETURN_IF_ERROR(r.I64("step", &snap.step));
  if (snap.step < 0) return r.Error(absl::StrCat("negative step ", snap.step));
  DTRAIN_RETURN_IF_ERROR(String(r, "job id", &snap.job_id));
  DTRAIN_RETURN_IF_ERROR(ReadConfig(r, version, &snap.config));
  DTRAIN_RETURN_IF_ERROR(r.U64("key count", &count));
  if (count > r.remaining() / kMinKeyRecord) return r.Error(absl::StrCat("key count ", count, " cannot fit"));
  snap.keys.resize(count);
  std::set<uint64_t> seen;
  for (KeyState& k : snap.keys) {
    uint32_t ndim;
    uint64_t n;
    DTRAIN_RETURN_IF_ERROR(r.U64("key", &k.key));
    if (!seen.insert(k.key).second) return r.Error(absl::StrCat("duplicate key ", k.key));
    DTRAIN_RETURN_IF_ERROR(r.I64("key version", &k.version));
    if (k.version != snap.step) {
      return r.Error(absl::StrCat("key ", k.key, " at version ", k.version, " in a snapshot of step ", snap.step));
    }
    DTRAIN_RETURN_IF_ERROR(r.U32("dimension count", &ndim));
    if (ndim > kMaxDims) return r.Error(absl::StrCat("key ", k.key, " has ", ndim, " dimensions"));
    k.shape.resize(ndim);
    for (int64_t& d : k.shape) DTRAIN_RETURN_IF_ERROR(r.I64("dimension", &d));
    DTRAIN_RETURN_IF_ERROR(r.U64("value count", &n));
    if (NumElements(k.shape) != static_cast<int64_t>(n)) {
      return r.Error(absl::StrCat("key ", k.key, ": ", n, " values do not fill its shape"));
    }
    DTRAIN_RETURN_IF_ERROR(r.Floats("values", n, &k.values));
    DTRAIN_RETURN_IF_ERROR(r.U64("state count", &n));
    DTRAIN_RETURN_IF_ERROR(r.Floats("optimizer state", n, &k.optimizer_state));
  }
  if (!r.done()) return r.Error("unexpected bytes after the last key");
  return snap;
}

std::vector<int64_t> ListShardSnapshotSteps(const std::string& dir, int server_rank) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = StepOfName(it->path().filename().string(), server_rank);
    if (step >= 0) steps.push_back(step);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

std::vector<int64_t> CompleteShardSnapshotSteps(const std::string& dir, int server_rank, const std::string& job_id) {
  std::vector<int64_t> complete;
  for (int64_t step : ListShardSnapshotSteps(dir, server_rank)) {
    const std::string path = ShardSnapshotPath(dir, server_rank, step);
    absl::StatusOr<ShardSnapshot> snap = ReadShardSnapshot(path);
    if (!snap.ok()) {
      DTRAIN_LOG(WARNING) << "ignoring snapshot " << path << ": " << snap.status().message();
    } else if (snap->server_rank != server_rank || snap->step != step) {
      DTRAIN_LOG(WARNING) << "ignoring snapshot " << path << ": it holds server " << snap->server_rank << " step "
                          << snap->step;
    } else if (!job_id.empty() && snap->job_id != job_id) {
      DTRAIN_LOG(WARNING) << "ignoring snapshot " << path << ": it is of job '" << snap->job_id
                          << "', this server runs job '" << job_id << "'";
    } else {
      complete.push_back(step);
    }
  }
  return complete;
}

absl::Status RemoveShardSnapshot(const std::string& dir, int server_rank, int64_t step) {
  const std::string path = ShardSnapshotPath(dir, server_rank, step);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot remove snapshot ", path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace dtrain::kv
