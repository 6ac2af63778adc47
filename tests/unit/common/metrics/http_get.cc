#include "tests/unit/common/metrics/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace dtrain::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

int MillisUntil(absl::Time deadline) {
  return static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in addr = Loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect to 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError("send failed");
  }
  std::string raw;
  char buf[16384];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, MillisUntil(deadline)) <= 0) {
      return absl::DeadlineExceededError(absl::StrCat("GET 127.0.0.1:", port, path, ": no complete answer in time"));
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  const size_t head_end = raw.find("\r\n\r\n");
  HttpResponse r;
  if (raw.size() < 12 || head_end == std::string::npos || !absl::SimpleAtoi(raw.substr(9, 3), &r.status)) {
    return absl::InternalError(absl::StrCat("malformed HTTP answer: ", raw.substr(0, 200)));
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

}  // namespace dtrain::testing
