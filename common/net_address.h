// host:port text, in one place: joining, splitting (IPv6 literals in brackets,
// "[::1]:9091"), and which local address other nodes can reach us at.
//
// Every address a dtrain process builds or parses goes through here, so an IPv6
// pod address works wherever an IPv4 one does.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtrain {

// "10.0.0.1", 9091 -> "10.0.0.1:9091"; "::1", 9091 -> "[::1]:9091"; a host already in
// brackets is kept as it is.
std::string JoinHostPort(absl::string_view host, int port);

struct HostPort {
  std::string host;  // without brackets: "::1", "10.0.0.1", "scheduler.svc"
  int port = 0;
};

// The inverse of JoinHostPort: "h:p" or "[v6]:p"; the port must be 0..65535.
// INVALID_ARGUMENT naming the text: a missing port, an IPv6 literal without
// brackets ("::1:9091" is ambiguous), an empty host.
absl::StatusOr<HostPort> SplitHostPort(absl::string_view address);

// The local address this machine uses to reach `remote_host` (a name or literal):
// the source address of the route to it (UDP connect + getsockname; no packet is
// sent). What ps-lite does when DMLC_INTERFACE is not set.
absl::StatusOr<std::string> LocalAddressToward(const std::string& remote_host);

// The first address of network interface `name` (e.g. "eth0"), IPv4 preferred;
// ps-lite's DMLC_INTERFACE. NOT_FOUND naming the interfaces there are.
absl::StatusOr<std::string> InterfaceAddress(const std::string& name);

}  // namespace dtrain
