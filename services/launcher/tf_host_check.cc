#include "services/launcher/tf_host_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net_address.h"

namespace dtrain::launcher {

bool IsLocalHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return false;
  bool local = false;
  for (addrinfo* a = result; a != nullptr && !local; a = a->ai_next) {
    // Port 0 and no listen(): nothing is taken. bind() fails with EADDRNOTAVAIL for an
    // address that no interface here holds.
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    local = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    ::close(fd);
  }
  ::freeaddrinfo(result);
  return local;
}

absl::Status CheckTaskIsThisHost(const TfClusterLaunch& launch, const std::function<bool(const std::string&)>& is_local,
                                 std::string* warning) {
  std::map<std::string, bool> cache;  // one resolution per host, however many ports it has
  auto local = [&](const std::string& address) {
    absl::StatusOr<HostPort> hp = SplitHostPort(address);  // checked when parsed
    const std::string host = hp.ok() ? hp->host : address;
    auto it = cache.find(host);
    if (it == cache.end()) it = cache.emplace(host, is_local(host)).first;
    return it->second;
  };
  const std::string& mine = launch.address();
  if (local(mine)) return absl::OkStatus();
  std::vector<std::string> here;
  for (Role role : {Role::kServer, Role::kWorker}) {
    const std::vector<std::string>& list = role == Role::kServer ? launch.cluster.ps : launch.cluster.worker;
    for (size_t i = 0; i < list.size(); ++i) {
      if (local(list[i])) here.push_back(absl::StrCat(launch.NameOf(role, static_cast<int>(i)), " (", list[i], ")"));
    }
  }
  if (here.empty()) {
    *warning = absl::StrCat(launch.task_text, " makes this task ", launch.task_name, " at ", mine,
                            ", and no host of the spec is an address of this machine (behind a NAT or port "
                            "forward?); make sure this is the machine listed for it");
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(launch.task_text, " makes this task ", launch.task_name, " at ", mine,
                   ", which is not an address of this "
                   "machine; this machine is listed as ",
                   absl::StrJoin(here, ", "), ": wrong ",
                   launch.source == "TF_CONFIG" ? "TF_CONFIG task" : "--task_index or --job_name", "?"));
}

}  // namespace dtrain::launcher
