// Checkpoints other tools can read: the weights of a .params file in the
// safetensors format (huggingface/safetensors), which Python's `safetensors`, numpy
// (with a few lines of json) and most frameworks load without dtrain's code:
//
//   u64 little-endian N | N bytes of JSON header, space-padded to a multiple of 8 |
//   the tensors' bytes, back to back
//
//   header: {"__metadata__": {"format": "pt", ...},
//            "conv1.weight": {"dtype": "F32", "shape": [20, 1, 5, 5], "data_offsets": [0, 2000]}, ...}
//
// Offsets are relative to the first byte after the header; the tensors cover that
// buffer exactly, in the .params file's order (the model's named_parameters order).
// Values are float32 little-endian whatever the host. Written here, without LibTorch or
// a safetensors library, so the worker, `dtrain export` and tests share one encoder.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"

namespace dtrain::checkpoint {

// PREFIX-0001.safetensors, beside PREFIX-0001.params.
std::string SafetensorsPath(const std::string& prefix, int epoch);

// The file image. INVALID_ARGUMENT for an empty or duplicate name, a name starting with
// "__" (safetensors reserves it), a negative dimension, or a value count that is not
// the shape's product. `metadata` goes to "__metadata__" (left out when empty).
absl::StatusOr<std::string> EncodeSafetensors(const std::vector<NamedTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata);

// EncodeSafetensors, then WriteFileAtomically: `path` is either the whole new file or
// left as it was.
absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// Reads a file written by WriteSafetensors (F32 tensors only) back into tensors in
// header order: for tests and tools. DATA_LOSS naming the file for a truncated or
// malformed file.
absl::StatusOr<std::vector<NamedTensor>> ReadSafetensors(const std::string& path);

// `dtrain export`: PREFIX-NNNN.params (read whole and CRC-checked first, so a corrupt
// or missing file writes nothing) to `output`, atomically. The metadata names the
// source file, epoch and, when PREFIX-symbol.json is there, the network.
// NOT_FOUND naming the .params file when epoch `epoch` has none (with the epochs that
// exist), DATA_LOSS for a corrupt one.
absl::Status ExportSafetensors(const std::string& prefix, int epoch, const std::string& output);

}  // namespace dtrain::checkpoint
