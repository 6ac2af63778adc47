#include "common/checkpoint/safetensors.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_codec.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace dtrain::checkpoint {
namespace {

using OrderedJson = nlohmann::ordered_json;

// safetensors' own readers refuse headers above 100 MB; ours are a few KB.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr size_t kMaxFileBytes = size_t{16} << 30;  // as .params

absl::StatusOr<uint64_t> ElementCount(const NamedTensor& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", t.name, "\" has a bad shape [", absl::StrJoin(t.shape, ","), "]"));
    }
  }
  return n;
}

}  // namespace

std::string SafetensorsPath(const std::string& prefix, int epoch) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%04d.safetensors", epoch);
  return prefix + buf;
}

absl::StatusOr<std::string> EncodeSafetensors(const std::vector<NamedTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    // "__metadata__" and any "__" name are the format's, not a tensor's.
    if (t.name.empty() || absl::StartsWith(t.name, "__") || !seen.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write tensor \"", t.name,
                                                     "\" to safetensors: names must be unique, non-empty and not "
                                                     "start with \"__\""));
    }
    DTRAIN_ASSIGN_OR_RETURN(const uint64_t n, ElementCount(t));
    if (n != t.data.size()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name, "\" has shape [", absl::StrJoin(t.shape, ","),
                                                     "] (", n, " values) but ", t.data.size(), " values"));
    }
    const uint64_t end = offset + 4 * n;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = header.dump();
  // The data must start 8-byte aligned (safetensors pads with spaces, which JSON ignores).
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  internal::PutU64(&out, json.size());
  out += json;
  for (const NamedTensor& t : tensors) internal::PutFloats(&out, t.data);
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<std::string> bytes = EncodeSafetensors(tensors, metadata);
  if (!bytes.ok())
    return absl::Status(bytes.status().code(), absl::StrCat("cannot write ", path, ": ", bytes.status().message()));
  return WriteFileAtomically(path, *bytes);
}

absl::StatusOr<std::vector<NamedTensor>> ReadSafetensors(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(const std::string bytes, ReadFileLimited(path, kMaxFileBytes));
  auto bad = [&](const std::string& why) { return absl::DataLossError(absl::StrCat(path, ": ", why)); };
  if (bytes.size() < 8) return bad(absl::StrCat("only ", bytes.size(), " bytes, less than the header length"));
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8) {
    return bad(absl::StrCat("header length ", header_len, " does not fit in the file of ", bytes.size(), " bytes"));
  }
  OrderedJson header;
  try {
    header = OrderedJson::parse(bytes.substr(8, header_len));
  } catch (const std::exception& e) {
    return bad(absl::StrCat("header is not JSON: ", e.what()));
  }
  if (!header.is_object()) return bad("header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - header_len;
  const char* data = bytes.data() + 8 + header_len;
  std::vector<NamedTensor> out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      if (info.at("dtype").get<std::string>() != "F32") return bad(absl::StrCat(name, ": dtype is not F32"));
      NamedTensor t;
      t.name = name;
      t.shape = info.at("shape").get<std::vector<int64_t>>();
      const auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      DTRAIN_ASSIGN_OR_RETURN(const uint64_t n, ElementCount(t));
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != 4 * n) {
        return bad(absl::StrCat(name, ": data_offsets do not match its shape or the file"));
      }
      t.data.resize(n);
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t b = 0;
        for (int k = 0; k < 4; ++k) b |= uint32_t{static_cast<unsigned char>(data[offsets[0] + 4 * i + k])} << (8 * k);
        std::memcpy(&t.data[i], &b, 4);
      }
      out.push_back(std::move(t));
    } catch (const std::exception& e) {
      return bad(absl::StrCat(name, ": ", e.what()));
    }
  }
  return out;
}

absl::Status ExportSafetensors(const std::string& prefix, int epoch, const std::string& output) {
  const std::string params_path = ParamsPath(prefix, epoch);
  if (!std::filesystem::exists(params_path)) {
    absl::StatusOr<std::vector<int>> epochs = ListEpochs(prefix);
    const std::string have = epochs.ok() && !epochs->empty()
                                 ? absl::StrCat("epochs there: ", absl::StrJoin(*epochs, ", "))
                                 : std::string("no epoch has a checkpoint there");
    return absl::NotFoundError(
        absl::StrCat("no checkpoint for epoch ", epoch, ": ", params_path, " does not exist (", have, ")"));
  }
  // Read whole and CRC-checked before anything is written: a corrupt file exports nothing.
  DTRAIN_ASSIGN_OR_RETURN(const std::vector<NamedTensor> tensors, ReadParams(params_path));
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"source", std::filesystem::path(params_path).filename().string()},
      {"epoch", std::to_string(epoch)},
  };
  if (absl::StatusOr<SymbolInfo> sym = ReadSymbol(prefix); sym.ok()) metadata["network"] = sym->network;
  return WriteSafetensors(output, tensors, metadata);
}

}  // namespace dtrain::checkpoint
