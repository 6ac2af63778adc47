#include "common/checkpoint/checkpoint_codec.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dtrain::checkpoint::internal {
namespace {

constexpr size_t kMagicLen = 8;

uint32_t Crc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // crc32() takes a 32-bit length: feed big buffers in slices.
  while (!bytes.empty()) {
    size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void PutFloats(std::string* out, const std::vector<float>& v) {
  out->reserve(out->size() + 4 * v.size());
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    PutU32(out, bits);
  }
}

std::string BeginFramedFile(const char* magic) { return BeginFramedFile(magic, kFormatVersion); }

std::string BeginFramedFile(const char* magic, uint32_t version) {
  std::string out(magic, kMagicLen);
  PutU32(&out, version);
  return out;
}

void FinishFramedFile(std::string* out) { PutU32(out, Crc32(*out)); }

absl::Status ByteReader::U32(const char* what, uint32_t* v) {
  DTRAIN_RETURN_IF_ERROR(Need(what, 4));
  *v = static_cast<uint32_t>(TakeLittleEndian(4));
  return absl::OkStatus();
}

absl::Status ByteReader::U64(const char* what, uint64_t* v) {
  DTRAIN_RETURN_IF_ERROR(Need(what, 8));
  *v = TakeLittleEndian(8);
  return absl::OkStatus();
}

absl::Status ByteReader::I64(const char* what, int64_t* v) {
  DTRAIN_RETURN_IF_ERROR(Need(what, 8));
  *v = static_cast<int64_t>(TakeLittleEndian(8));
  return absl::OkStatus();
}

absl::Status ByteReader::Bytes(const char* what, size_t n, std::string* v) {
  DTRAIN_RETURN_IF_ERROR(Need(what, n));
  v->assign(body_.substr(pos_, n));
  pos_ += n;
  return absl::OkStatus();
}

absl::Status ByteReader::Floats(const char* what, uint64_t n, std::vector<float>* v) {
  if (n > remaining() / 4) {
    return Error(absl::StrCat(what, " claims ", n, " floats, more than the file holds"));
  }
  v->resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(TakeLittleEndian(4));
    std::memcpy(&(*v)[i], &bits, 4);
  }
  return absl::OkStatus();
}

absl::Status ByteReader::Error(const std::string& what) const {
  return absl::DataLossError(
      absl::StrCat(path_, ": ", what, " at offset ", base_ + pos_, " (", remaining(), " bytes left before the CRC)"));
}

absl::Status ByteReader::Need(const char* what, size_t n) const {
  if (n <= remaining()) return absl::OkStatus();
  return Error(absl::StrCat("truncated reading ", what, " (needs ", n, " bytes)"));
}

uint64_t ByteReader::TakeLittleEndian(int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) {
    v |= uint64_t{static_cast<uint8_t>(body_[pos_ + i])} << (8 * i);
  }
  pos_ += width;
  return v;
}

absl::StatusOr<ByteReader> OpenFramedFile(const std::string& path, const std::string& bytes, const char* magic,
                                          const char* kind) {
  uint32_t version;
  return OpenFramedFile(path, bytes, magic, kind, kFormatVersion, &version);
}

absl::StatusOr<ByteReader> OpenFramedFile(const std::string& path, const std::string& bytes, const char* magic,
                                          const char* kind, uint32_t max_version, uint32_t* version) {
  constexpr size_t kHeader = kMagicLen + 4;
  if (bytes.size() < kHeader + 4) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", bytes.size(), " bytes is too short for a dtrain ", kind, " file"));
  }
  if (bytes.compare(0, kMagicLen, magic, kMagicLen) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": bad magic, not a dtrain ", kind, " file (expected \"", magic, "\")"));
  }
  size_t body_end = bytes.size() - 4;
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= uint32_t{static_cast<uint8_t>(bytes[body_end + i])} << (8 * i);
  }
  uint32_t computed = Crc32(std::string_view(bytes).substr(0, body_end));
  if (stored != computed) {
    char crcs[64];
    std::snprintf(crcs, sizeof(crcs), "stored %08x, computed %08x", stored, computed);
    return absl::DataLossError(absl::StrCat(path, ": CRC-32 mismatch (", crcs, "): the file is corrupt or truncated"));
  }
  ByteReader r(path, std::string_view(bytes).substr(kMagicLen, body_end - kMagicLen), kMagicLen);
  DTRAIN_RETURN_IF_ERROR(r.U32("version", version));
  if (*version < kFormatVersion || *version > max_version) {
    const std::string reads = max_version == kFormatVersion ? absl::StrCat(kFormatVersion)
                                                            : absl::StrCat(kFormatVersion, " to ", max_version);
    return absl::DataLossError(
        absl::StrCat(path, ": unsupported ", kind, " format version ", *version, " (this build reads ", reads, ")"));
  }
  return r;
}

}  // namespace dtrain::checkpoint::internal
