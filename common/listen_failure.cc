#include "common/listen_failure.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/net_address.h"

namespace dtrain {
namespace {

constexpr const char* kListenState = "0A";  // TCP_LISTEN in /proc/net/tcp

// Inodes of the sockets listening on `port`.
std::set<std::string> ListeningInodes(int port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.size() < 10 || f[3] != kListenState) continue;
      const size_t colon = f[1].rfind(':');
      int local_port = 0;
      if (colon == std::string::npos || !absl::SimpleHexAtoi(f[1].substr(colon + 1), &local_port)) continue;
      if (local_port == port) inodes.insert(f[9]);
    }
  }
  return inodes;
}

// The program's name: argv[0]'s last component (comm is cut at 15 characters).
std::string Command(const std::string& pid) {
  std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  if (!argv0.empty()) return argv0.substr(argv0.rfind('/') + 1);
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  std::getline(in, comm);
  return std::string(absl::StripAsciiWhitespace(comm));
}

// 0 when the address could be bound now, else the errno of bind().
int ProbeBind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0) {
    return EADDRNOTAVAIL;
  }
  int error = EADDRNOTAVAIL;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // Like gRPC: a port held only by TIME_WAIT connections is free.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    error = ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    ::close(fd);
    if (error != 0) break;
  }
  ::freeaddrinfo(found);
  return error;
}

}  // namespace

std::string ListeningProcess(int port) {
  const std::set<std::string> inodes = ListeningInodes(port);
  if (inodes.empty()) return "";
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return "";
  std::string found;
  while (dirent* e = ::readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string fd_dir = absl::StrCat("/proc/", e->d_name, "/fd");
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;  // another user's process
    while (dirent* fd = ::readdir(fds)) {
      char target[128] = {0};
      const std::string link = absl::StrCat(fd_dir, "/", fd->d_name);
      const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      absl::string_view t(target, static_cast<size_t>(n));
      if (!absl::ConsumePrefix(&t, "socket:[") || !absl::ConsumeSuffix(&t, "]")) continue;
      if (inodes.count(std::string(t)) > 0) {
        found = absl::StrCat("pid ", pid, " (", Command(e->d_name), ")");
        break;
      }
    }
    ::closedir(fds);
    if (!found.empty()) break;
  }
  ::closedir(proc);
  return found;
}

std::string DescribeListenFailure(const std::string& listen) {
  const std::string prefix = absl::StrCat("cannot listen on ", listen);
  absl::StatusOr<HostPort> hp = SplitHostPort(listen);
  if (!hp.ok()) return absl::StrCat(prefix, ": ", hp.status().message());
  if (hp->port == 0) return absl::StrCat(prefix, ": no free port");
  const int error = ProbeBind(hp->host, hp->port);
  if (error == EADDRINUSE) {
    const std::string owner = ListeningProcess(hp->port);
    return absl::StrCat(prefix, ": the address is already in use",
                        owner.empty() ? " (by a process this user cannot see)" : absl::StrCat(" by ", owner),
                        "; stop it or choose another port");
  }
  if (error != 0) return absl::StrCat(prefix, ": ", std::strerror(error));
  return absl::StrCat(prefix, " (the address was refused; is it an address of this machine?)");
}

}  // namespace dtrain
