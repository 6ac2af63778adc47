// What the fuzz targets share: a scratch directory for decoders that take a path, and
// the convention that a corpus file is one option byte followed by the bytes under
// test (so a seed is a real file with one byte in front, see make_seed_corpus.cc).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace dtrain::fuzz {

// The option byte and the rest of a fuzz input.
struct Input {
  uint8_t options = 0;
  std::string_view body;
};

inline Input SplitOptions(const uint8_t* data, size_t size) {
  if (size == 0) return {};
  return {data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1)};
}

// One directory per process, made on first use under $TMPDIR (or /tmp) and never
// inside the source tree. libFuzzer runs inputs one at a time, so a fixed name per
// file is enough; parallel jobs are separate processes with their own directory.
inline const std::string& ScratchDir() {
  // Never destroyed: the exit handler below still needs it after static destructors.
  static const std::string* const dir = [] {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/dtrain-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      abort();
    }
    return new std::string(tmpl);
  }();
  // Removed on a normal exit; a crash leaves it (and the input that crashed) behind.
  static const bool cleanup = std::atexit([] {
                                std::error_code ec;
                                std::filesystem::remove_all(*dir, ec);
                              }) == 0;
  (void)cleanup;
  return *dir;
}

// Writes `bytes` to ScratchDir()/name and returns the path (aborts if it cannot: a
// full /tmp must not look like a finding in the decoder).
inline std::string WriteScratch(const std::string& name, std::string_view bytes) {
  const std::string path = ScratchDir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    abort();
  }
  return path;
}

}  // namespace dtrain::fuzz
