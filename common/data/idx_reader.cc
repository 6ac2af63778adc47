#include "common/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace dtrain::data {
namespace {

// The largest IDX payload we accept after decompression. Fashion-MNIST's training
// images are 47 MB; the cap only exists so that a gzip bomb or a corrupt header cannot
// make us allocate the machine's memory.
constexpr size_t kMaxIdxBytes = size_t{2} << 30;
constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int kMaxDims = 4;

bool HasGzipMagic(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b;
}

// Inflates one or more concatenated gzip members (what `cat a.gz b.gz` or pigz
// produce). Anything after the last member that is not another member is an error:
// silently ignoring it would hide a damaged file.
absl::StatusOr<std::string> Gunzip(const std::string& path, const std::string& in) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 15 window bits + 16: accept the gzip wrapper only, and check its CRC and length.
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    return absl::InternalError(absl::StrCat(path, ": inflateInit2 failed"));
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = 0;
  size_t consumed = 0;  // input bytes handed to zlib so far
  std::string out;
  char buf[1 << 16];
  absl::Status status;
  while (true) {
    if (zs.avail_in == 0 && consumed < in.size()) {
      // avail_in is 32-bit; feed large inputs in slices.
      size_t chunk = std::min<size_t>(in.size() - consumed, 1u << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + consumed));
      zs.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    int rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (out.size() > kMaxIdxBytes) {
      status = absl::ResourceExhaustedError(
          absl::StrCat(path, ": decompresses to more than the ", kMaxIdxBytes, "-byte limit"));
      break;
    }
    if (rc == Z_STREAM_END) {
      size_t left = zs.avail_in + (in.size() - consumed);
      if (left == 0) break;
      size_t pos = in.size() - left;
      if (left >= 2 && static_cast<uint8_t>(in[pos]) == 0x1f && static_cast<uint8_t>(in[pos + 1]) == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      status = absl::DataLossError(absl::StrCat(path, ": ", left, " bytes of garbage after the gzip stream"));
      break;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == in.size()) {
      status = absl::DataLossError(
          absl::StrCat(path, ": gzip stream is truncated (ended after ", in.size(), " compressed bytes)"));
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status =
          absl::DataLossError(absl::StrCat(path, ": corrupt gzip stream: ", zs.msg != nullptr ? zs.msg : zError(rc)));
      break;
    }
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

uint32_t BigEndian32(const std::string& b, size_t pos) {
  return (uint32_t{static_cast<uint8_t>(b[pos])} << 24) | (uint32_t{static_cast<uint8_t>(b[pos + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(b[pos + 2])} << 8) | uint32_t{static_cast<uint8_t>(b[pos + 3])};
}

std::string DimsString(const std::vector<int64_t>& dims) { return absl::StrJoin(dims, "x"); }

absl::StatusOr<IdxArray> ParseIdx(const std::string& path, const std::string& bytes) {
  if (bytes.size() < 4) {
    return absl::DataLossError(absl::StrCat(path,
                                            ": truncated IDX header: expected at least 4 "
                                            "bytes, file has ",
                                            bytes.size()));
  }
  uint8_t zero0 = bytes[0], zero1 = bytes[1], type = bytes[2], ndim = bytes[3];
  if (zero0 != 0 || zero1 != 0 || type != kUnsignedByteType || ndim < 1 || ndim > kMaxDims) {
    char magic[16];
    std::snprintf(magic, sizeof(magic), "0x%08x", BigEndian32(bytes, 0));
    return absl::DataLossError(
        absl::StrCat(path, ": bad IDX magic ", magic, " (expected 0x000008DD: unsigned bytes, 1 to 4 dimensions)"));
  }
  size_t header = 4 + 4 * size_t{ndim};
  if (bytes.size() < header) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated IDX header: expected ", header, " bytes, file has ", bytes.size()));
  }
  IdxArray out;
  // Each size fits in 32 bits and there are at most 4, so the product is checked
  // against the cap as it grows to keep it from overflowing 64 bits.
  uint64_t expected = 1;
  bool too_big = false;
  for (int i = 0; i < ndim; ++i) {
    uint32_t d = BigEndian32(bytes, 4 + 4 * i);
    out.dims.push_back(d);
    expected *= d;
    if (expected > kMaxIdxBytes) too_big = true;
  }
  if (too_big) {
    return absl::DataLossError(absl::StrCat(path, ": IDX header says ", DimsString(out.dims), ", larger than the ",
                                            kMaxIdxBytes, "-byte limit"));
  }
  uint64_t actual = bytes.size() - header;
  if (actual < expected) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: header says ", DimsString(out.dims), " = ", expected,
                                            " data bytes, file has ", actual));
  }
  if (actual > expected) {
    return absl::DataLossError(absl::StrCat(path, ": ", actual - expected, " trailing bytes after the ", expected,
                                            " data bytes of a ", DimsString(out.dims), " array"));
  }
  out.data.assign(bytes.begin() + header, bytes.end());
  return out;
}

bool FileExists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

// DIR/BASE.gz if it exists, else DIR/BASE; NOT_FOUND naming both when neither does.
absl::StatusOr<std::string> PickIdxFile(const std::string& dir, const std::string& base) {
  std::string raw = dir.empty() ? base : absl::StrCat(dir, "/", base);
  std::string gz = raw + ".gz";
  if (FileExists(gz)) return gz;
  if (FileExists(raw)) return raw;
  return absl::NotFoundError(absl::StrCat("neither ", gz, " nor ", raw, " exists"));
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFileLimited(path, kMaxIdxBytes));
  // The magic bytes decide, so a gzip file without the suffix still reads; a .gz name
  // without the magic is a damaged download, and saying so beats "bad IDX magic".
  if (HasGzipMagic(bytes)) {
    DTRAIN_ASSIGN_OR_RETURN(bytes, Gunzip(path, bytes));
  } else if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    return absl::DataLossError(absl::StrCat(path, ": named .gz but not gzip data (no 1f 8b magic)"));
  }
  return ParseIdx(path, bytes);
}

absl::StatusOr<ImageSet> LoadImageSet(const std::string& dir, const std::string& split) {
  if (split.empty()) return absl::InvalidArgumentError("LoadImageSet: empty split name");
  DTRAIN_ASSIGN_OR_RETURN(std::string images_path, PickIdxFile(dir, split + "-images-idx3-ubyte"));
  DTRAIN_ASSIGN_OR_RETURN(std::string labels_path, PickIdxFile(dir, split + "-labels-idx1-ubyte"));
  DTRAIN_ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path));
  DTRAIN_ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path));
  if (images.dims.size() != 3) {
    return absl::DataLossError(absl::StrCat(images_path,
                                            ": expected 3 dimensions (count x rows"
                                            " x cols), found ",
                                            images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    return absl::DataLossError(absl::StrCat(labels_path, ": expected 1 dimension (count), found ", labels.dims.size()));
  }
  if (images.dims[0] == 0 || images.dims[1] == 0 || images.dims[2] == 0) {
    return absl::DataLossError(absl::StrCat(images_path, ": empty image set (", DimsString(images.dims), ")"));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::DataLossError(absl::StrCat(images_path, " holds ", images.dims[0], " images but ", labels_path,
                                            " holds ", labels.dims[0], " labels"));
  }
  ImageSet set;
  set.count = images.dims[0];
  set.rows = images.dims[1];
  set.cols = images.dims[2];
  set.pixels = std::move(images.data);
  set.labels = std::move(labels.data);
  return set;
}

}  // namespace dtrain::data
