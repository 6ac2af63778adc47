// Is this machine the one the spec lists for my task? Catches a --task_index that
// names another machine's entry (two machines swapped their indices, or a command
// copied without changing it): the job would start with ranks on the wrong hosts,
// and the scheduler, which lives at worker 0's listed address, would be unreachable.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "services/launcher/tf_cluster_spec.h"

namespace dtrain::launcher {

// Whether `host` (a name or an address, no port) is an address of this machine: it
// resolves to an address that a socket here can bind to.
bool IsLocalHost(const std::string& host);

// With `is_local` (IsLocalHost; tests inject their own):
//  - my entry's host is local: OK;
//  - it is not, but other entries' hosts are: INVALID_ARGUMENT naming my task, its
//    address, and the entries that are this machine ("this host is listed as worker 1
//    (10.0.0.3:2222): wrong --task_index?");
//  - no entry is local (a NAT or port forward in between, names this machine does not
//    resolve): OK, and `*warning` says that the check could not tell.
absl::Status CheckTaskIsThisHost(const TfClusterLaunch& launch, const std::function<bool(const std::string&)>& is_local,
                                 std::string* warning);

}  // namespace dtrain::launcher
