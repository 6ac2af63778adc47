// Checkpoint files, in MXNet's naming:
//   PREFIX-symbol.json    network (and the mlp's hidden widths), classes, input shape (JSON, written once)
//   PREFIX-0001.params    weights after epoch 1 (named float32 tensors)
//   PREFIX-0001.states    optimizer state per key, from the servers (or local store)
//
// .params/.states are a small binary format: magic, version, a count, records, and a
// CRC-32 of everything before it, so truncation or bit flips are detected. Every write
// goes to a temp file in the same directory, is fsync'ed and renamed over the target.
// No LibTorch here: the inference service and tools read these too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/kv/key_state.h"

namespace dtrain::checkpoint {

struct SymbolInfo {
  std::string network;               // "mlp", "lenet", "resnet", "resnet18"
  int num_classes = 10;              // the data set's
  std::vector<int64_t> input_shape;  // without batch, the data's: {1, 28, 28}, {3, 32, 32}
  std::vector<std::string> class_names;
  std::string run_id;  // the run that wrote the set; empty in files from before run ids
  // The mlp's hidden layer widths ("hidden": [2048, 2048]); empty for a network without
  // them, and in files from before the field, whose mlp was MXNet's 128,64.
  std::vector<int64_t> hidden;
  // The resnet's depth ("num_layers": 20); 0 for the other networks.
  int num_layers = 0;
};

// What a run was started with, as far as it decides what resuming it means: a resume
// with another kv mode, batch size, worker count, data or seed would continue a
// different computation (silently: the weights still load). Saved in every .states
// file since format version 2 and compared on resume.
struct RunRecord {
  std::string run_id;  // NewRunId() at a fresh start; a resume keeps it
  std::string network;
  std::string kv_store;
  int64_t num_workers = 0;
  int64_t batch_size = 0;
  int64_t num_examples = 0;
  int64_t seed = 0;
  // The mlp's hidden widths; empty for other networks and in records from before the
  // field (whose mlp had the default widths).
  std::vector<int64_t> hidden;
};

// 16 random hex digits.
std::string NewRunId();

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct OptimizerStates {
  std::string optimizer;  // "sgd" / "adam": refused on resume if it differs
  std::vector<kv::KeyState> keys;
  // Written when set (format version 2); read back as unset from version-1 files,
  // which predate the record.
  std::optional<RunRecord> run;
};

std::string SymbolPath(const std::string& prefix);             // PREFIX-symbol.json
std::string ParamsPath(const std::string& prefix, int epoch);  // PREFIX-0001.params
std::string StatesPath(const std::string& prefix, int epoch);  // PREFIX-0001.states

absl::Status WriteSymbol(const std::string& prefix, const SymbolInfo& info);
absl::StatusOr<SymbolInfo> ReadSymbol(const std::string& prefix);

absl::Status WriteParams(const std::string& path, const std::vector<NamedTensor>& tensors);
// DATA_LOSS naming the file for a bad magic, CRC mismatch or truncation.
absl::StatusOr<std::vector<NamedTensor>> ReadParams(const std::string& path);

absl::Status WriteStates(const std::string& path, const OptimizerStates& states);
absl::StatusOr<OptimizerStates> ReadStates(const std::string& path);

// Checks loaded tensors against the model's: same names, order and shapes.
// FAILED_PRECONDITION naming the file and the first difference
// ("model-0003.params: conv1.weight has shape [20,1,5,5], the lenet model expects [..]").
absl::Status CheckParamsMatch(const std::string& path, const std::vector<NamedTensor>& loaded,
                              const std::vector<NamedTensor>& expected_shapes);

// The epochs N for which a file named PREFIX-NNNN.params exists (exactly as
// ParamsPath writes it), newest first; names only, nothing is read. NOT_FOUND naming
// the directory if it cannot be listed.
absl::StatusOr<std::vector<int>> ListEpochs(const std::string& prefix);

// The newest epoch N for which PREFIX-N.params exists and reads back intact; NOT_FOUND
// if none.
absl::StatusOr<int> NewestCompleteEpoch(const std::string& prefix);

}  // namespace dtrain::checkpoint
