// dtrain-infer with TLS and authentication: Predict and ModelInfo want a client
// certificate from --tls-ca or a bearer token from --auth-token-file; the health
// service answers anyone; `dtrain predict` speaks both.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/checkpoint/checkpoint.h"
#include "common/credentials.h"
#include "common/file_io.h"
#include "common/grpc_util.h"
#include "tests/integration/inference/infer_process.h"

namespace dtrain::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

std::string ServedPrefix() {
  const std::string prefix = ScratchDir() + "/m";
  InstallFile(checkpoint::SymbolPath(Trained().prefix), checkpoint::SymbolPath(prefix));
  InstallFile(checkpoint::ParamsPath(Trained().prefix, 1), checkpoint::ParamsPath(prefix, 1));
  return prefix;
}

std::string Read(const std::string& path) { return *ReadFileLimited(path, 1 << 20); }

TransportSecurity Tls(const std::string& dir, const std::string& stem) {
  TransportSecurity t;
  t.tls = true;
  t.ca_pem = Read(dir + "/ca.crt");
  if (!stem.empty()) {
    t.cert_pem = Read(dir + "/" + stem + ".crt");
    t.key_pem = Read(dir + "/" + stem + ".key");
  }
  return t;
}

grpc::Status Info(const std::string& address, const TransportSecurity& t, const std::string& token) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::Inference::NewStub(grpc::CreateCustomChannel(address, ChannelCredentialsFor(t), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
  if (!token.empty()) ctx.AddMetadata("authorization", std::string("Bearer ") + token);
  v1::ModelInfoResponse resp;
  return stub->ModelInfo(&ctx, v1::ModelInfoRequest(), &resp);
}

TEST(InferenceAuthTest, TokensOrClientCertificatesAndOpenHealth) {
  const std::string dir = ScratchDir();
  const std::string certs = dir + "/certs";
  auto [code, out] = RunToEnd({Bin("dtrain"), "certs", "--dir", certs, "--job", "serve", "--names", "infer,client"},
                              absl::Seconds(30));
  ASSERT_EQ(code, 0) << out;
  auto [code2, out2] =
      RunToEnd({Bin("dtrain"), "certs", "--dir", dir + "/other", "--names", "client"}, absl::Seconds(30));
  ASSERT_EQ(code2, 0) << out2;
  ASSERT_TRUE(WriteFileAtomically(dir + "/tokens", std::string("# accepted\n") + kToken + "\n", 0600).ok());

  // This process's own channels (InferProcess's stubs): TLS trusting the CA, no certificate.
  SetTransportSecurity(Tls(certs, ""));
  InferProcess server({"--model-prefix", ServedPrefix(), "--tls-cert", certs + "/infer.crt", "--tls-key",
                       certs + "/infer.key", "--tls-ca", certs + "/ca.crt", "--auth-token-file", dir + "/tokens"});
  ASSERT_TRUE(server.started()) << server.process().output();
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();

  const std::string a = server.address();
  grpc::Status none = Info(a, Tls(certs, ""), "");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  EXPECT_TRUE(absl::StrContains(none.error_message(), "a client certificate from its CA or a bearer token"))
      << none.error_message();
  EXPECT_EQ(Info(a, Tls(certs, ""), "wrong-token-wrong-token").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Info(a, Tls(certs, ""), kToken).ok());
  EXPECT_TRUE(Info(a, Tls(certs, "client"), "").ok());
  // Another CA's client certificate does not even finish the handshake.
  TransportSecurity foreign = Tls(dir + "/other", "client");
  foreign.ca_pem = Read(certs + "/ca.crt");
  EXPECT_EQ(Info(a, foreign, kToken).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Info(a, TransportSecurity{}, kToken).error_code(), grpc::StatusCode::UNAVAILABLE) << "plaintext";

  // dtrain predict: with a token, with a certificate, and with neither.
  const std::vector<std::string> predict = {Bin("dtrain"), "predict",
                                            "--server",    a,
                                            "--images",    std::string(kDataDir) + "/t10k-images-idx3-ubyte.gz",
                                            "--limit",     "8",
                                            "--tls-ca",    certs + "/ca.crt",
                                            "--wait",      "5"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = predict;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunToEnd(argv, absl::Seconds(60));
  };
  auto [c1, o1] = with({"--auth-token-file", dir + "/tokens"});
  EXPECT_EQ(c1, 0) << o1;
  auto [c2, o2] = with({"--tls-cert", certs + "/client.crt", "--tls-key", certs + "/client.key"});
  EXPECT_EQ(c2, 0) << o2;
  auto [c3, o3] = with({});
  EXPECT_EQ(c3, 1) << o3;
  EXPECT_TRUE(absl::StrContains(o3, "bearer token")) << o3;
  EXPECT_EQ(server.Stop(), 0) << server.process().output();
  SetTransportSecurity(TransportSecurity{});
}

}  // namespace
}  // namespace dtrain::testing
