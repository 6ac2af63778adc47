// Why a server could not listen, in words an operator can act on. gRPC's own
// answer to a failed bind is a null server; this probes the address again and,
// when it is taken, names the process holding it (best effort: /proc).
#pragma once

#include <string>

namespace dtrain {

// "cannot listen on 0.0.0.0:9091: the address is already in use by pid 4242
// (dtrain-scheduler)", or with the bind error when it is something else
// ("Cannot assign requested address" for a host that is not ours).
std::string DescribeListenFailure(const std::string& listen);

// "pid 4242 (dtrain-scheduler)" for the process with a TCP socket listening on
// `port` (IPv4 or IPv6), found through /proc/net/tcp{,6} and /proc/*/fd; "" when
// it cannot be told (another user's process, no /proc).
std::string ListeningProcess(int port);

}  // namespace dtrain
