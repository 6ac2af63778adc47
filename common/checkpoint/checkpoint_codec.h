// The framing shared by .params and .states files (private to checkpoint.cc):
//
//   8-byte magic | u32 version | body ... | u32 CRC-32 of every byte before it
//
// All integers and floats are little-endian, written byte by byte so the files are the
// same on any host. The reader checks every length against the bytes left, so a
// corrupt count is an error rather than a huge allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain::checkpoint::internal {

inline constexpr uint32_t kFormatVersion = 1;

// Appends to a file image under construction.
void PutU32(std::string* out, uint32_t v);
void PutU64(std::string* out, uint64_t v);
void PutFloats(std::string* out, const std::vector<float>& v);

// Starts a file image: magic (exactly 8 bytes) and version (kFormatVersion unless given).
std::string BeginFramedFile(const char* magic);
std::string BeginFramedFile(const char* magic, uint32_t version);
// Appends the CRC-32 of everything written so far.
void FinishFramedFile(std::string* out);

// Bounds-checked reads over a file's body; every error is DATA_LOSS naming the file,
// the item being read and its offset.
class ByteReader {
 public:
  ByteReader(std::string path, std::string_view body, size_t base_offset)
      : path_(std::move(path)), body_(body), base_(base_offset) {}

  size_t remaining() const { return body_.size() - pos_; }
  bool done() const { return pos_ == body_.size(); }

  absl::Status U32(const char* what, uint32_t* v);
  absl::Status U64(const char* what, uint64_t* v);
  absl::Status I64(const char* what, int64_t* v);
  absl::Status Bytes(const char* what, size_t n, std::string* v);
  // Refuses `n` beyond what the file can still hold before allocating anything.
  absl::Status Floats(const char* what, uint64_t n, std::vector<float>* v);

  // DATA_LOSS "PATH: WHAT at offset N (K bytes left before the CRC)".
  absl::Status Error(const std::string& what) const;

 private:
  absl::Status Need(const char* what, size_t n) const;
  uint64_t TakeLittleEndian(int width);

  std::string path_;
  std::string_view body_;  // points into the caller's file image
  size_t base_;            // file offset of body_[0], for messages
  size_t pos_ = 0;
};

// Checks size, magic, CRC and version of the file image `bytes` (which must outlive
// the reader) and returns a reader positioned after the version. The CRC is checked
// before anything is parsed so that a truncated or bit-flipped file fails with one
// clear message. `kind` ("params") appears in messages.
absl::StatusOr<ByteReader> OpenFramedFile(const std::string& path, const std::string& bytes, const char* magic,
                                          const char* kind);
// The same for a kind with several versions: accepts kFormatVersion .. max_version and
// stores the file's in *version.
absl::StatusOr<ByteReader> OpenFramedFile(const std::string& path, const std::string& bytes, const char* magic,
                                          const char* kind, uint32_t max_version, uint32_t* version);

}  // namespace dtrain::checkpoint::internal
