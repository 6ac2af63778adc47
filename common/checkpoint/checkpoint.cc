#include "common/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/checkpoint/checkpoint_codec.h"
#include "common/file_io.h"

namespace dtrain::checkpoint {
namespace {

using internal::ByteReader;
using internal::FinishFramedFile;
using internal::PutFloats;
using internal::PutU32;
using internal::PutU64;

constexpr char kParamsMagic[] = "DTRNPRM1";
constexpr char kStatesMagic[] = "DTRNSTA1";
constexpr char kSymbolFormat[] = "dtrain-symbol-v1";
// Version 2 appends the run record (u32 length + JSON) after the keys; version 1 ends
// after the keys and is still read (as a file without a record).
constexpr uint32_t kStatesVersionWithRun = 2;
constexpr uint32_t kMaxRunRecordBytes = 64 * 1024;

// Limits on lengths read from a file, so that a corrupt (or hostile) count is refused
// before it can drive an allocation. Counts and element numbers are further bounded by
// the bytes actually left in the file.
constexpr uint32_t kMaxNameLen = 4096;
constexpr uint32_t kMaxDims = 8;
// An mlp's hidden layers (models::kMaxHiddenLayers; the models check widths when they build).
constexpr size_t kMaxHiddenLayers = 16;
constexpr int64_t kMaxNumLayers = 10000;
constexpr uint32_t kMaxOptimizerNameLen = 256;
constexpr size_t kMaxSymbolBytes = 1 << 20;
// Far above any model we train; only stops a wrong path (a disk image) being slurped.
constexpr size_t kMaxCheckpointBytes = size_t{16} << 30;
// Smallest encoding of one record: name length + 1 name byte + ndim (params), or
// key + version + count (states).
constexpr uint64_t kMinParamRecord = 4 + 1 + 4;
constexpr uint64_t kMinStateRecord = 8 + 8 + 8;

std::string ShapeString(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

std::string RunRecordJson(const RunRecord& r) {
  nlohmann::json j;
  j["run_id"] = r.run_id;
  j["network"] = r.network;
  j["kv_store"] = r.kv_store;
  j["num_workers"] = r.num_workers;
  j["batch_size"] = r.batch_size;
  j["num_examples"] = r.num_examples;
  j["seed"] = r.seed;
  if (!r.hidden.empty()) j["hidden"] = r.hidden;
  return j.dump();
}

// Every field must be there with its type: a record that is half there would let a
// resume pass checks it never made.
absl::StatusOr<RunRecord> ParseRunRecord(const ByteReader& r, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return r.Error(absl::StrCat("malformed run record: ", e.what()));
  }
  if (!j.is_object()) return r.Error("run record is not a JSON object");
  RunRecord rec;
  for (auto [name, field] :
       {std::pair{"run_id", &rec.run_id}, std::pair{"network", &rec.network}, std::pair{"kv_store", &rec.kv_store}}) {
    if (!j.contains(name) || !j[name].is_string()) {
      return r.Error(absl::StrCat("run record field \"", name, "\" is missing or not a string"));
    }
    *field = j[name].get<std::string>();
  }
  for (auto [name, field] : {std::pair{"num_workers", &rec.num_workers}, std::pair{"batch_size", &rec.batch_size},
                             std::pair{"num_examples", &rec.num_examples}, std::pair{"seed", &rec.seed}}) {
    if (!j.contains(name) || !j[name].is_number_integer()) {
      return r.Error(absl::StrCat("run record field \"", name, "\" is missing or not an integer"));
    }
    *field = j[name].get<int64_t>();
  }
  // Optional: records written before the mlp's widths were configurable have none.
  if (j.contains("hidden")) {
    const auto& h = j["hidden"];
    if (!h.is_array() || h.size() > kMaxHiddenLayers) {
      return r.Error("run record field \"hidden\" is not a list of at most 16 integers");
    }
    for (const auto& w : h) {
      if (!w.is_number_integer() || w.get<int64_t>() < 1) {
        return r.Error("run record field \"hidden\" holds a width that is not a positive integer");
      }
      rec.hidden.push_back(w.get<int64_t>());
    }
  }
  return rec;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string SymbolPath(const std::string& prefix) { return prefix + "-symbol.json"; }

std::string NewRunId() {
  // Not security-relevant, only unique: two runs started on one prefix must differ.
  std::random_device rd;
  const uint64_t id = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid()) ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

std::string ParamsPath(const std::string& prefix, int epoch) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%04d.params", epoch);
  return prefix + buf;
}

std::string StatesPath(const std::string& prefix, int epoch) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%04d.states", epoch);
  return prefix + buf;
}

absl::Status WriteSymbol(const std::string& prefix, const SymbolInfo& info) {
  std::string path = SymbolPath(prefix);
  bool shape_ok = !info.input_shape.empty() &&
                  std::all_of(info.input_shape.begin(), info.input_shape.end(), [](int64_t d) { return d > 0; });
  if (info.network.empty() || info.num_classes < 1 || !shape_ok ||
      (!info.class_names.empty() && info.class_names.size() != static_cast<size_t>(info.num_classes))) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": network \"", info.network, "\", ", info.num_classes,
                     " classes, input shape ", ShapeString(info.input_shape), ", ", info.class_names.size(),
                     " class names: need a network name, classes >= 1, a positive shape, and no or one "
                     "name per class"));
  }
  nlohmann::json j;
  j["network"] = info.network;
  j["num_classes"] = info.num_classes;
  j["input_shape"] = info.input_shape;
  j["class_names"] = info.class_names;
  if (!info.run_id.empty()) j["run_id"] = info.run_id;
  if (!info.hidden.empty()) j["hidden"] = info.hidden;
  if (info.num_layers != 0) j["num_layers"] = info.num_layers;
  j["format"] = kSymbolFormat;
  return WriteFileAtomically(path, j.dump(2) + "\n");
}

absl::StatusOr<SymbolInfo> ReadSymbol(const std::string& prefix) {
  std::string path = SymbolPath(prefix);
  DTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxSymbolBytes));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": malformed JSON: ", e.what()));
  }
  if (!j.is_object()) return absl::DataLossError(absl::StrCat(path, ": not a JSON object"));
  auto bad = [&](const char* field, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field \"", field, "\" is ", j.contains(field) ? "not " : "missing, want ", want));
  };
  if (!j.contains("format") || !j["format"].is_string()) return bad("format", "a string");
  if (j["format"] != kSymbolFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": format \"", j["format"].get<std::string>(), "\" is not \"", kSymbolFormat, "\""));
  }
  SymbolInfo info;
  if (!j.contains("network") || !j["network"].is_string() || j["network"].get<std::string>().empty()) {
    return bad("network", "a non-empty string");
  }
  info.network = j["network"].get<std::string>();
  if (!j.contains("num_classes") || !j["num_classes"].is_number_integer() || j["num_classes"].get<int64_t>() < 1 ||
      j["num_classes"].get<int64_t>() > 1000000) {
    return bad("num_classes", "an integer in [1, 1000000]");
  }
  info.num_classes = j["num_classes"].get<int>();
  const char* shape_want = "a list of 1 to 8 positive integers";
  if (!j.contains("input_shape") || !j["input_shape"].is_array() || j["input_shape"].empty() ||
      j["input_shape"].size() > kMaxDims) {
    return bad("input_shape", shape_want);
  }
  for (const auto& d : j["input_shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) return bad("input_shape", shape_want);
    info.input_shape.push_back(d.get<int64_t>());
  }
  const char* names_want = "a list of strings, one per class (or empty)";
  if (!j.contains("class_names") || !j["class_names"].is_array()) {
    return bad("class_names", names_want);
  }
  for (const auto& n : j["class_names"]) {
    if (!n.is_string()) return bad("class_names", names_want);
    info.class_names.push_back(n.get<std::string>());
  }
  if (!info.class_names.empty() && info.class_names.size() != static_cast<size_t>(info.num_classes)) {
    return bad("class_names", names_want);
  }
  if (j.contains("run_id")) {
    if (!j["run_id"].is_string()) return bad("run_id", "a string");
    info.run_id = j["run_id"].get<std::string>();
  }
  if (j.contains("hidden")) {
    const char* hidden_want = "a list of 1 to 16 positive integers (the mlp's hidden widths)";
    if (!j["hidden"].is_array() || j["hidden"].empty() || j["hidden"].size() > kMaxHiddenLayers) {
      return bad("hidden", hidden_want);
    }
    for (const auto& w : j["hidden"]) {
      if (!w.is_number_integer() || w.get<int64_t>() < 1) return bad("hidden", hidden_want);
      info.hidden.push_back(w.get<int64_t>());
    }
  }
  // Optional: only resnets have a depth (models::ResolveNetworkSpec checks its value).
  if (j.contains("num_layers")) {
    if (!j["num_layers"].is_number_integer() || j["num_layers"].get<int64_t>() < 1 ||
        j["num_layers"].get<int64_t>() > kMaxNumLayers) {
      return bad("num_layers", "an integer in [1, 10000] (the resnet's depth)");
    }
    info.num_layers = j["num_layers"].get<int>();
  }
  return info;
}

absl::Status WriteParams(const std::string& path, const std::vector<NamedTensor>& tensors) {
  std::string out = internal::BeginFramedFile(kParamsMagic);
  PutU64(&out, tensors.size());
  std::set<std::string> seen;
  for (const NamedTensor& t : tensors) {
    uint64_t elements = 1;
    bool dims_ok = t.shape.size() <= kMaxDims;
    for (int64_t d : t.shape) {
      dims_ok = dims_ok && d >= 0 && !__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements);
    }
    if (t.name.empty() || t.name.size() > kMaxNameLen || !dims_ok || elements != t.data.size() ||
        !seen.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": tensor \"", t.name, "\" with shape ", ShapeString(t.shape), " and ",
                       t.data.size(), " values: need a unique name of 1 to ", kMaxNameLen, " bytes, at most ", kMaxDims,
                       " non-negative dims, and one value per element"));
    }
    PutU32(&out, static_cast<uint32_t>(t.name.size()));
    out += t.name;
    PutU32(&out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) PutU64(&out, static_cast<uint64_t>(d));
    PutFloats(&out, t.data);
  }
  FinishFramedFile(&out);
  return WriteFileAtomically(path, out);
}

absl::StatusOr<std::vector<NamedTensor>> ReadParams(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFileLimited(path, kMaxCheckpointBytes));
  DTRAIN_ASSIGN_OR_RETURN(ByteReader r, internal::OpenFramedFile(path, bytes, kParamsMagic, "params"));
  uint64_t count;
  DTRAIN_RETURN_IF_ERROR(r.U64("tensor count", &count));
  if (count > r.remaining() / kMinParamRecord) {
    return r.Error(absl::StrCat("tensor count ", count, " cannot fit in the file"));
  }
  std::vector<NamedTensor> tensors(count);
  std::set<std::string> seen;
  for (NamedTensor& t : tensors) {
    uint32_t name_len, ndim;
    DTRAIN_RETURN_IF_ERROR(r.U32("name length", &name_len));
    if (name_len == 0 || name_len > kMaxNameLen) {
      return r.Error(absl::StrCat("tensor name length ", name_len, " is not in [1, ", kMaxNameLen, "]"));
    }
    DTRAIN_RETURN_IF_ERROR(r.Bytes("tensor name", name_len, &t.name));
    if (!seen.insert(t.name).second) return r.Error("duplicate tensor \"" + t.name + "\"");
    DTRAIN_RETURN_IF_ERROR(r.U32("dimension count", &ndim));
    if (ndim > kMaxDims) {
      return r.Error(absl::StrCat(t.name, " has ", ndim, " dimensions (max ", kMaxDims, ")"));
    }
    uint64_t elements = 1;
    for (uint32_t i = 0; i < ndim; ++i) {
      int64_t d;
      DTRAIN_RETURN_IF_ERROR(r.I64("dimension", &d));
      // Bound the running product by the floats the file can still hold, so it can't
      // overflow and can't promise more data than exists.
      uint64_t cap = r.remaining() / 4;
      if (d < 0 || (d > 0 && elements > cap / static_cast<uint64_t>(d))) {
        return r.Error(absl::StrCat(t.name, " has impossible dimension ", d));
      }
      elements *= static_cast<uint64_t>(d);
      t.shape.push_back(d);
    }
    DTRAIN_RETURN_IF_ERROR(r.Floats("tensor data", elements, &t.data));
  }
  if (!r.done()) return r.Error("unexpected bytes after the last tensor");
  return tensors;
}

absl::Status WriteStates(const std::string& path, const OptimizerStates& states) {
  if (states.optimizer.empty() || states.optimizer.size() > kMaxOptimizerNameLen) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": optimizer name \"", states.optimizer,
                                                   "\" must be 1 to ", kMaxOptimizerNameLen, " bytes"));
  }
  // Without a record the file is version 1, byte for byte what older builds wrote.
  std::string out =
      internal::BeginFramedFile(kStatesMagic, states.run ? kStatesVersionWithRun : internal::kFormatVersion);
  PutU32(&out, static_cast<uint32_t>(states.optimizer.size()));
  out += states.optimizer;
  PutU64(&out, states.keys.size());
  std::set<uint64_t> seen;
  for (const kv::KeyState& k : states.keys) {
    if (!seen.insert(k.key).second) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": key ", k.key, " appears twice"));
    }
    PutU64(&out, k.key);
    PutU64(&out, static_cast<uint64_t>(k.version));
    PutU64(&out, k.optimizer_state.size());
    PutFloats(&out, k.optimizer_state);
  }
  if (states.run) {
    const std::string record = RunRecordJson(*states.run);
    if (record.size() > kMaxRunRecordBytes) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": run record of ", record.size(),
                                                     " bytes (max ", kMaxRunRecordBytes, ")"));
    }
    PutU32(&out, static_cast<uint32_t>(record.size()));
    out += record;
  }
  FinishFramedFile(&out);
  return WriteFileAtomically(path, out);
}

absl::StatusOr<OptimizerStates> ReadStates(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFileLimited(path, kMaxCheckpointBytes));
  uint32_t version;
  DTRAIN_ASSIGN_OR_RETURN(
      ByteReader r, internal::OpenFramedFile(path, bytes, kStatesMagic, "states", kStatesVersionWithRun, &version));
  OptimizerStates states;
  uint32_t name_len;
  DTRAIN_RETURN_IF_ERROR(r.U32("optimizer name length", &name_len));
  if (name_len == 0 || name_len > kMaxOptimizerNameLen) {
    return r.Error(absl::StrCat("optimizer name length ", name_len, " is not in [1, ", kMaxOptimizerNameLen, "]"));
  }
  DTRAIN_RETURN_IF_ERROR(r.Bytes("optimizer name", name_len, &states.optimizer));
  uint64_t count;
  DTRAIN_RETURN_IF_ERROR(r.U64("key count", &count));
  if (count > r.remaining() / kMinStateRecord) {
    return r.Error(absl::StrCat("key count ", count, " cannot fit in the file"));
  }
  states.keys.resize(count);
  std::set<uint64_t> seen;
  for (kv::KeyState& k : states.keys) {
    uint64_t n;
    DTRAIN_RETURN_IF_ERROR(r.U64("key", &k.key));
    if (!seen.insert(k.key).second) return r.Error(absl::StrCat("duplicate key ", k.key));
    DTRAIN_RETURN_IF_ERROR(r.I64("key version", &k.version));
    DTRAIN_RETURN_IF_ERROR(r.U64("state length", &n));
    DTRAIN_RETURN_IF_ERROR(r.Floats("state data", n, &k.optimizer_state));
  }
  if (version >= kStatesVersionWithRun) {
    uint32_t len;
    std::string text;
    DTRAIN_RETURN_IF_ERROR(r.U32("run record length", &len));
    if (len > kMaxRunRecordBytes) {
      return r.Error(absl::StrCat("run record length ", len, " is over ", kMaxRunRecordBytes));
    }
    DTRAIN_RETURN_IF_ERROR(r.Bytes("run record", len, &text));
    DTRAIN_ASSIGN_OR_RETURN(states.run, ParseRunRecord(r, text));
  }
  if (!r.done()) return r.Error("unexpected bytes after the last key");
  return states;
}

absl::Status CheckParamsMatch(const std::string& path, const std::vector<NamedTensor>& loaded,
                              const std::vector<NamedTensor>& expected_shapes) {
  size_t common = std::min(loaded.size(), expected_shapes.size());
  for (size_t i = 0; i < common; ++i) {
    const NamedTensor& got = loaded[i];
    const NamedTensor& want = expected_shapes[i];
    if (got.name != want.name) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": tensor #", i, " is ", got.name, ", the model expects ", want.name));
    }
    if (got.shape != want.shape) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": ", got.name, " has shape ", ShapeString(got.shape),
                                                        ", the model expects ", ShapeString(want.shape)));
    }
  }
  if (loaded.size() < expected_shapes.size()) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": has ", loaded.size(), " tensors, the model expects ",
                                                      expected_shapes.size(), " (missing ",
                                                      expected_shapes[common].name, ")"));
  }
  if (loaded.size() > expected_shapes.size()) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": has ", loaded.size(), " tensors, the model expects ",
                                                      expected_shapes.size(), " (unexpected ", loaded[common].name,
                                                      ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ListEpochs(const std::string& prefix) {
  const std::string dir = DirName(prefix);
  const std::string base = prefix.substr(prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/') + 1);
  const std::string head = base + "-";
  constexpr std::string_view kTail = ".params";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) {
    return absl::NotFoundError(absl::StrCat("no checkpoints for ", prefix, ": cannot list ", dir, ": ", ec.message()));
  }
  std::vector<int> epochs;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.size() <= head.size() + kTail.size() || name.compare(0, head.size(), head) != 0 ||
        name.compare(name.size() - kTail.size(), kTail.size(), kTail) != 0) {
      continue;
    }
    const std::string digits = name.substr(head.size(), name.size() - head.size() - kTail.size());
    // Nine digits keep the value inside int; %04d never writes more for real epochs.
    if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const int epoch = std::stoi(digits);
    // Only names ParamsPath writes: "-00001.params" would read back as "-0001.params".
    if (epoch > 0 && ParamsPath(base, epoch) == name) epochs.push_back(epoch);
  }
  std::sort(epochs.rbegin(), epochs.rend());
  return epochs;
}

absl::StatusOr<int> NewestCompleteEpoch(const std::string& prefix) {
  DTRAIN_ASSIGN_OR_RETURN(const std::vector<int> epochs, ListEpochs(prefix));
  const std::string dir = DirName(prefix);
  for (int epoch : epochs) {
    absl::StatusOr<std::vector<NamedTensor>> params = ReadParams(ParamsPath(prefix, epoch));
    if (params.ok()) return epoch;
    // A crash mid-epoch can't leave a partial file (writes are atomic), but a disk error
    // or a hand-copied file can: fall back to the previous epoch and say why.
    DTRAIN_LOG(WARNING) << "skipping checkpoint epoch " << epoch << ": " << params.status();
  }
  if (epochs.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint ", prefix, "-NNNN.params in ", dir));
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint ", prefix, "-NNNN.params: all ", epochs.size(),
                                          " found are corrupt (logged above)"));
}

}  // namespace dtrain::checkpoint
