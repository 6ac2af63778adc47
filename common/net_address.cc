#include "common/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain {
namespace {

std::string SockaddrText(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

std::string JoinHostPort(absl::string_view host, int port) {
  const bool bracketed = !host.empty() && host.front() == '[';
  if (!bracketed && host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> SplitHostPort(absl::string_view address) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("expected HOST:PORT or [IPv6]:PORT, got '", address, "': ", why));
  };
  HostPort out;
  absl::string_view port_text;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return bad("no closing ']'");
    out.host = std::string(address.substr(1, close - 1));
    if (close + 1 >= address.size() || address[close + 1] != ':') return bad("no port after ']'");
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return bad("no port");
    if (address.find(':') != colon) return bad("an IPv6 address needs brackets, e.g. [::1]:9091");
    out.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
  }
  if (out.host.empty()) return bad("empty host");
  if (!absl::SimpleAtoi(port_text, &out.port) || out.port < 0 || out.port > 65535) {
    return bad("the port must be a number in 0..65535");
  }
  return out;
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& remote_host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(remote_host.c_str(), "9", &hints, &found); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve '", remote_host, "': ", ::gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // connect() on a UDP socket only picks the route and the source address.
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      ::close(fd);
      ::freeaddrinfo(found);
      return SockaddrText(reinterpret_cast<sockaddr*>(&local));
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(absl::StrCat("no route to '", remote_host, "': ", last_error));
}

absl::StatusOr<std::string> InterfaceAddress(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::string v4, v6;
  std::set<std::string> names;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name != nullptr) names.insert(i->ifa_name);
    if (i->ifa_addr == nullptr || name != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = SockaddrText(i->ifa_addr);
    // A link-local IPv6 address needs a zone to be reached; skip it.
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty() &&
        !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
      v6 = SockaddrText(i->ifa_addr);
    }
  }
  ::freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return absl::NotFoundError(absl::StrCat("network interface '", name,
                                          "' has no usable address (interfaces: ", absl::StrJoin(names, ", "), ")"));
}

}  // namespace dtrain
