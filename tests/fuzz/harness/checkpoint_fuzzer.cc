// The checkpoint readers (common/checkpoint): .params, .states and -symbol.json, as
// `--load-epoch`, the inference service's hot reload and NewestCompleteEpoch read them.
//
// Option byte: (options & 0x7f) % 3 picks the reader (params, states, symbol); for the binary
// files bit 7 appends the right CRC-32 to the body, so mutations get past the CRC
// check into the record parser (a fuzzer cannot guess a CRC). Whatever reads back must
// be written again byte for byte: the formats have one encoding per content.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/file_io.h"
#include "tests/fuzz/harness/fuzz_util.h"

namespace dtrain::fuzz {
namespace {

std::string WithCrc(std::string_view body) {
  std::string out(body);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  return out;
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "checkpoint round trip: %s\n", what);
  abort();
}

// The file `path` holds must be what writing it again produces.
void ExpectRewrittenEqual(const std::string& path, const std::string& rewritten) {
  absl::StatusOr<std::string> a = ReadFileLimited(path, size_t{1} << 30);
  absl::StatusOr<std::string> b = ReadFileLimited(rewritten, size_t{1} << 30);
  if (!a.ok() || !b.ok()) Fail("cannot read the files back");
  if (*a != *b) Fail("rewritten file differs from the one read");
}

void Params(const std::string& file) {
  const std::string path = WriteScratch("fz-0001.params", file);
  absl::StatusOr<std::vector<checkpoint::NamedTensor>> tensors = checkpoint::ReadParams(path);
  if (!tensors.ok()) return;
  if (!checkpoint::CheckParamsMatch(path, *tensors, *tensors).ok()) Fail("params do not match themselves");
  const std::string again = ScratchDir() + "/fz-0002.params";
  if (!checkpoint::WriteParams(again, *tensors).ok()) Fail("params read back cannot be written");
  ExpectRewrittenEqual(path, again);
}

void States(const std::string& file) {
  const std::string path = WriteScratch("fz-0001.states", file);
  absl::StatusOr<checkpoint::OptimizerStates> states = checkpoint::ReadStates(path);
  if (!states.ok()) return;
  const std::string again = ScratchDir() + "/fz-0002.states";
  if (!checkpoint::WriteStates(again, *states).ok()) Fail("states read back cannot be written");
  ExpectRewrittenEqual(path, again);
}

void Symbol(std::string_view file) {
  const std::string prefix = ScratchDir() + "/fz";
  WriteScratch("fz-symbol.json", file);
  absl::StatusOr<checkpoint::SymbolInfo> info = checkpoint::ReadSymbol(prefix);
  if (!info.ok()) return;
  const std::string prefix2 = ScratchDir() + "/fz2";
  if (!checkpoint::WriteSymbol(prefix2, *info).ok()) Fail("symbol read back cannot be written");
  absl::StatusOr<checkpoint::SymbolInfo> back = checkpoint::ReadSymbol(prefix2);
  if (!back.ok()) Fail("rewritten symbol does not read");
  if (back->network != info->network || back->num_classes != info->num_classes ||
      back->input_shape != info->input_shape || back->class_names != info->class_names ||
      back->run_id != info->run_id) {
    Fail("rewritten symbol differs");
  }
}

}  // namespace
}  // namespace dtrain::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain::fuzz;
  const Input in = SplitOptions(data, size);
  const bool fix_crc = (in.options & 0x80) != 0;
  const std::string file = fix_crc ? WithCrc(in.body) : std::string(in.body);
  switch ((in.options & 0x7f) % 3) {
    case 0: Params(file); break;
    case 1: States(file); break;
    default: Symbol(in.body); break;
  }
  return 0;
}
