#include "common/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace dtrain {
namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status SyncDirectory(const std::string& dir, const std::string& path) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open directory ", dir, " to sync ", path));
  }
  // Some file systems cannot fsync a directory (EINVAL); the rename is then as durable
  // as they make it, which is the best available.
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL) {
    return absl::ErrnoToStatus(err, absl::StrCat("fsync of directory ", dir, " after writing ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes, unsigned mode) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot write ", path, ": creating ", tmp));
  }
  auto fail = [&](int err, const char* step) {
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("cannot write ", path, ": ", step));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "write");
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail(errno, "fsync");
  const int rc = close(fd);
  fd = -1;
  if (rc != 0) return fail(errno, "close");
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail(errno, "rename");
  return SyncDirectory(DirName(path), path);
}

absl::StatusOr<std::string> ReadFileLimited(const std::string& path, size_t max_bytes) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open ", path));
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    if (bytes.size() + n > max_bytes) {
      std::fclose(f);
      return absl::ResourceExhaustedError(absl::StrCat(path, ": larger than the ", max_bytes, "-byte limit"));
    }
    bytes.append(buf, n);
  }
  // fread also stops on errors such as EISDIR: tell them apart from end of file.
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path));
  return bytes;
}

}  // namespace dtrain
