// `dtrain health --addr HOST:PORT [--service NAME]`: one grpc.health.v1.Health/Check,
// as the kubelet's native gRPC probe makes, but through the job's credentials
// (common/credentials.h), so that it also reaches a server that speaks TLS. The
// kubelet's own probe is plaintext only: on Kubernetes with TLS on, the chart runs this
// as an exec probe (helm/dtrain/README.md, "TLS and network policy").
//
//   dtrain health --addr 127.0.0.1:9091 --tls-ca ca.crt --tls-cert tls.crt --tls-key tls.key
//   dtrain health --addr 127.0.0.1:50051 --service dtrain.v1.Inference --tls-ca ca.crt
//
// Exit 0: SERVING; 1: any other answer, or no answer within --timeout; 2: bad flags.
//
// The two messages are encoded by hand with the generic stub (HealthCheckRequest{string
// service = 1}, HealthCheckResponse{enum status = 1}): Debian ships no health.proto, and
// the `dtrain` binary needs no generated code for it.
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/grpc_util.h"
#include "common/net_address.h"
#include "common/tls/tls_flags.h"
#include "services/launcher/commands.h"

namespace dtrain::launcher {
namespace {

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

struct HealthFlags {
  std::string addr;
  std::string service;   // "": the server as a whole
  double timeout_s = 1;  // the kubelet's default probe timeout
};

absl::Status ParseHealthFlags(const std::vector<std::string>& args, HealthFlags* f, bool* help) {
  FlagSet flags("dtrain health",
                "Asks a gRPC server's health service (grpc.health.v1.Health/Check) whether it is SERVING,\n"
                "over TLS when --tls-ca is given (a server of a --tls job also wants --tls-cert/--tls-key).\n"
                "Exit 0: SERVING; 1: not serving or no answer; 2: bad flags. For exec probes.\n"
                "Usage: dtrain health --addr HOST:PORT [--service NAME] [--tls-ca CA ...] [--timeout S]");
  flags.AddString("addr", &f->addr, "the server's host:port");
  flags.AddString("service", &f->service, "the service to ask about (e.g. dtrain.v1.Inference); empty: the server");
  flags.AddDouble("timeout", &f->timeout_s, "seconds to wait for the answer, connecting included");
  TlsFlags tls;
  AddTlsFlags(flags, &tls);
  absl::Status s = flags.Parse(args);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok() || *help) return s;
  if (f->addr.empty()) return absl::InvalidArgumentError("--addr HOST:PORT is required");
  if (absl::StatusOr<HostPort> hp = SplitHostPort(f->addr); !hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--addr: ", hp.status().message()));
  }
  if (!(f->timeout_s > 0)) return absl::InvalidArgumentError("--timeout must be > 0");
  if (f->service.size() > 127) return absl::InvalidArgumentError("--service: at most 127 characters");
  return ApplyTlsFlags(tls, TlsUse::kClient, /*listen_host=*/"");
}

// HealthCheckRequest{service}: field 1, length-delimited (a one-byte length suffices).
std::string EncodeRequest(const std::string& service) {
  std::string bytes;
  if (!service.empty()) {
    bytes.push_back(0x0a);
    bytes.push_back(static_cast<char>(service.size()));
    bytes += service;
  }
  return bytes;
}

// HealthCheckResponse.status (field 1, varint); absent: UNKNOWN (0).
int DecodeStatus(const std::string& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x08 ? static_cast<unsigned char>(bytes[1]) : 0;
}

const char* StatusName(int code) {
  static const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  return code >= 0 && code <= 3 ? kNames[code] : "unknown status";
}

}  // namespace

int HealthCommand(const std::vector<std::string>& args) {
  HealthFlags f;
  bool help = false;
  if (absl::Status s = ParseHealthFlags(args, &f, &help); !s.ok() || help) {
    if (!s.ok()) std::fprintf(stderr, "dtrain health: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 2;
  }
  const std::string what = f.service.empty() ? f.addr : absl::StrCat(f.addr, " ", f.service);
  grpc::Slice slice(EncodeRequest(f.service));
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub stub(MakeChannel(f.addr));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(f.timeout_s)));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, kCheckMethod, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    // UNAVAILABLE covers a refused connection and a failed handshake alike (gRPC's
    // message says which); NOT_FOUND is an unknown --service.
    std::printf("%s: health check failed: gRPC code %d: %s\n", what.c_str(), static_cast<int>(status.error_code()),
                status.error_message().c_str());
    return 1;
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    std::printf("%s: unreadable answer\n", what.c_str());
    return 1;
  }
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  const int code = DecodeStatus(bytes);
  std::printf("%s: %s\n", what.c_str(), StatusName(code));
  return code == 1 ? 0 : 1;
}

}  // namespace dtrain::launcher
