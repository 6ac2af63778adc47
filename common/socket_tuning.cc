#include "common/socket_tuning.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include <grpc/support/sync.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"

// gRPC's socket mutator: its interface lives in gRPC's src/core/lib/iomgr/socket_mutator.h,
// which is not among the installed headers, though grpc++'s ChannelArguments takes one and
// libgrpc exports grpc_socket_mutator_init. These declarations repeat that header's as of
// the gRPC this project builds with (Debian's 1.51); socket_tuning_test checks on a real
// connection that the options arrive, so a change of layout fails there, not in training.
typedef enum {
  GRPC_FD_CLIENT_CONNECTION_USAGE,
  GRPC_FD_SERVER_LISTENER_USAGE,
  GRPC_FD_SERVER_CONNECTION_USAGE,
} grpc_fd_usage;

struct grpc_mutate_socket_info {
  int fd;
  grpc_fd_usage usage;
};

struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
};

struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};

void grpc_socket_mutator_init(grpc_socket_mutator* mutator, const grpc_socket_mutator_vtable* vtable);

namespace dtrain {
namespace {

std::atomic<int64_t> client_connections{0};
std::atomic<int64_t> server_listeners{0};
std::atomic<int64_t> server_connections{0};
std::atomic<int64_t> refused{0};
std::atomic<int64_t> congestion_set{0};

absl::Mutex congestion_mu;
std::string& Congestion() ABSL_EXCLUSIVE_LOCKS_REQUIRED(congestion_mu) {
  static auto* name = new std::string;
  return *name;
}

// Sets and reads back TCP_CONGESTION; errno says why not.
bool TrySetCongestion(int fd, const std::string& name) {
  char got[32] = {};
  socklen_t len = sizeof(got);
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0 &&
         getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, got, &len) == 0 && name == got;
}

void SetCongestion(int fd) {
  std::string name;
  {
    absl::MutexLock lock(&congestion_mu);
    name = Congestion();
  }
  if (name.empty()) return;
  if (TrySetCongestion(fd, name)) {
    ++congestion_set;
  } else if (refused.fetch_add(1) == 0) {
    DTRAIN_LOG(INFO) << "a socket refused TCP congestion control " << name << " (" << std::strerror(errno)
                     << "); its connection goes on with the system's";
  }
}

bool SetNotSentLowWater(int fd) {
  const int want = kNotSentLowWaterBytes;
  int got = 0;
  socklen_t len = sizeof(got);
  if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &want, sizeof(want)) != 0 ||
      getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &got, &len) != 0 || got != want) {
    if (refused.fetch_add(1) == 0) {
      DTRAIN_LOG(INFO) << "a socket refused TCP_NOTSENT_LOWAT (" << std::strerror(errno)
                       << "); its connection goes on without it";
    }
    return false;
  }
  return true;
}

// Never fails the socket: gRPC drops a connection whose mutator returns false, and an
// option that helps the speed is not worth a connection.
bool Mutate(const grpc_mutate_socket_info* info, grpc_socket_mutator* /*mutator*/) {
  if (!SetNotSentLowWater(info->fd)) return true;
  SetCongestion(info->fd);
  switch (info->usage) {
    case GRPC_FD_CLIENT_CONNECTION_USAGE: ++client_connections; break;
    case GRPC_FD_SERVER_LISTENER_USAGE: ++server_listeners; break;
    case GRPC_FD_SERVER_CONNECTION_USAGE: ++server_connections; break;
  }
  return true;
}

bool MutateClientFd(int fd, grpc_socket_mutator* mutator) {
  const grpc_mutate_socket_info info{fd, GRPC_FD_CLIENT_CONNECTION_USAGE};
  return Mutate(&info, mutator);
}

// Every tuning mutator sets the same options, so gRPC may treat channels made with two of
// them as the same (the subchannel pool compares channel arguments).
int Compare(grpc_socket_mutator* /*a*/, grpc_socket_mutator* /*b*/) { return 0; }

void Destroy(grpc_socket_mutator* mutator) { delete mutator; }

constexpr grpc_socket_mutator_vtable kVtable = {MutateClientFd, Compare, Destroy, Mutate};

// Owned by the channel arguments it is given to (they drop their reference when destroyed).
grpc_socket_mutator* NewMutator() {
  auto* m = new grpc_socket_mutator;
  grpc_socket_mutator_init(m, &kVtable);
  return m;
}

class TuningOption final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* args) override { args->SetSocketMutator(NewMutator()); }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* /*plugins*/) override {}
};

}  // namespace

void SetSocketTuning(grpc::ChannelArguments& args) { args.SetSocketMutator(NewMutator()); }

void SetSocketTuning(grpc::ServerBuilder& builder) { builder.SetOption(std::make_unique<TuningOption>()); }

SocketTuningCounts SocketsTuned() {
  return SocketTuningCounts{client_connections.load(), server_listeners.load(), server_connections.load(),
                            refused.load(), congestion_set.load()};
}

absl::Status SetTcpCongestion(const std::string& name) {
  if (!name.empty()) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const bool ok = fd >= 0 && TrySetCongestion(fd, name);
    const int err = errno;
    if (fd >= 0) close(fd);
    if (!ok) {
      std::string allowed;
      std::ifstream in("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
      std::getline(in, allowed);
      return absl::InvalidArgumentError(absl::StrCat("--tcp-congestion ", name, ": this kernel refuses it (",
                                                     std::strerror(err),
                                                     "); allowed here: ", allowed.empty() ? "unknown" : allowed,
                                                     " (net.ipv4.tcp_allowed_congestion_control), or leave it unset"));
    }
    DTRAIN_LOG(INFO) << "connections use TCP congestion control " << name << " (--tcp-congestion)";
  }
  absl::MutexLock lock(&congestion_mu);
  Congestion() = name;
  return absl::OkStatus();
}

}  // namespace dtrain
