#include "tests/integration/security/tls_peer.h"

#include <gtest/gtest.h>

#include "common/file_io.h"
#include "common/grpc_util.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"
#include "dtrain/v1/scheduler.grpc.pb.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileLimited(path, 1 << 20);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

}  // namespace

std::shared_ptr<grpc::Channel> Dial(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& c) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // never reuse another test client's connection
  return grpc::CreateCustomChannel(address, c, args);
}

void MakeCerts(const std::string& dir, const std::string& job, int workers, int servers) {
  auto [code, out] = RunToEnd({Bin("dtrain"), "certs", "--dir", dir, "--job", job, "-n", std::to_string(workers), "-s",
                               std::to_string(servers), "--names", "client,operator"},
                              absl::Seconds(30));
  ASSERT_EQ(code, 0) << out;
}

TransportSecurity TlsFrom(const std::string& ca_dir, const std::string& cert_dir, const std::string& stem) {
  TransportSecurity t;
  t.tls = true;
  t.ca_pem = Read(ca_dir + "/ca.crt");
  if (!stem.empty()) {
    t.cert_pem = Read(cert_dir + "/" + stem + ".crt");
    t.key_pem = Read(cert_dir + "/" + stem + ".key");
  }
  return t;
}

grpc::Status CallScheduler(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  auto stub = v1::Scheduler::NewStub(Dial(address, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
  v1::GetStatusResponse resp;
  return stub->GetStatus(&ctx, v1::GetStatusRequest(), &resp);
}

grpc::Status CallServer(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  auto stub = v1::ParameterServer::NewStub(Dial(address, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
  v1::GetVersionsRequest req;
  req.set_worker_rank(-1);  // read-only: nobody's push state, no incarnation admitted
  v1::GetVersionsResponse resp;
  return stub->GetVersions(&ctx, req, &resp);
}

}  // namespace dtrain::testing
