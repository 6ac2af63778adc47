// `dtrain health` (services/launcher/health_command.cc), the chart's exec probe where the
// kubelet's gRPC probe cannot speak TLS: against in-process gRPC servers with the default
// health service, plaintext and TLS, as the training cluster (a client certificate
// required) and as dtrain-infer (a certificate checked only when given).
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "common/credentials.h"
#include "common/tls/cert_authority.h"
#include "gtest/gtest.h"
#include "services/launcher/commands.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::launcher {
namespace {

using dtrain::testing::TempDir;

// Writes DIR/STEM.crt and DIR/STEM.key; returns the flags that present them.
std::vector<std::string> CertFlags(const TempDir& dir, const std::string& stem, const tls::KeyAndCert& kc) {
  auto paths = tls::WriteKeyAndCert(dir.path(), stem, kc);
  EXPECT_TRUE(paths.ok()) << paths.status();
  return {"--tls-key=" + paths->first, "--tls-cert=" + paths->second};
}

class HealthCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = tls::CertAuthority::Create("probe", absl::Hours(1));
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = std::make_unique<tls::CertAuthority>(*std::move(ca));
    auto other = tls::CertAuthority::Create("elsewhere", absl::Hours(1));
    ASSERT_TRUE(other.ok()) << other.status();
    other_ca_ = std::make_unique<tls::CertAuthority>(*std::move(other));
    ca_file_ = dir_.File("ca.crt");
    testing::WriteBytes(ca_file_, ca_->ca().cert_pem);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    SetTransportSecurity({});  // the next test starts plaintext
  }

  // A server with only the default health service: plaintext, or TLS with the CA's
  // certificate for `name` and the given client-certificate policy.
  void Serve(bool tls, ClientCertPolicy policy = ClientCertPolicy::kRequire) {
    TransportSecurity security;
    if (tls) {
      auto leaf = ca_->Issue("server-0.probe", {"localhost", "127.0.0.1"}, absl::Hours(1));
      ASSERT_TRUE(leaf.ok()) << leaf.status();
      security = {true, ca_->ca().cert_pem, leaf->cert_pem, leaf->key_pem, policy};
    }
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(security), &port);
    builder.RegisterCallbackGenericService(&no_calls_);  // a server needs some service besides health
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    addr_ = "127.0.0.1:" + std::to_string(port);
  }

  int Health(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--addr=" + addr_, "--timeout=5"};
    args.insert(args.end(), extra.begin(), extra.end());
    return HealthCommand(args);
  }

  std::vector<std::string> Client(const tls::CertAuthority& ca, const std::string& name) {
    auto leaf = ca.Issue(name, {"localhost", "127.0.0.1"}, absl::Hours(1));
    EXPECT_TRUE(leaf.ok()) << leaf.status();
    return CertFlags(dir_, name, *leaf);
  }

  TempDir dir_;
  std::unique_ptr<tls::CertAuthority> ca_, other_ca_;
  std::string ca_file_;
  grpc::CallbackGenericService no_calls_;  // answers UNIMPLEMENTED
  std::unique_ptr<grpc::Server> server_;
  std::string addr_;
};

TEST_F(HealthCommandTest, PlaintextServingAndNotServing) {
  Serve(/*tls=*/false);
  EXPECT_EQ(Health({}), 0);
  server_->GetHealthCheckService()->SetServingStatus("dtrain.v1.Inference", false);
  EXPECT_EQ(Health({"--service=dtrain.v1.Inference"}), 1);
  server_->GetHealthCheckService()->SetServingStatus("dtrain.v1.Inference", true);
  EXPECT_EQ(Health({"--service=dtrain.v1.Inference"}), 0);
  EXPECT_EQ(Health({"--service=no.such.Service"}), 1);  // NOT_FOUND
}

TEST_F(HealthCommandTest, ClusterServerWantsAClientCertificateOfItsCa) {
  Serve(/*tls=*/true, ClientCertPolicy::kRequire);
  std::vector<std::string> node = Client(*ca_, "scheduler");
  node.push_back("--tls-ca=" + ca_file_);
  EXPECT_EQ(Health(node), 0);
  // The kubelet's probe: plaintext. The handshake fails, so does the check.
  EXPECT_EQ(Health({}), 1);
  // The server checked, but no certificate presented: refused in the handshake.
  EXPECT_EQ(Health({"--tls-ca=" + ca_file_}), 1);
  // A certificate of another CA (the client trusts both CAs, so that its own
  // certificate passes the start-up check and the server's verifies): the server refuses it.
  std::vector<std::string> stranger = Client(*other_ca_, "operator");
  const std::string both = dir_.File("both-cas.crt");
  testing::WriteBytes(both, ca_->ca().cert_pem + other_ca_->ca().cert_pem);
  stranger.push_back("--tls-ca=" + both);
  EXPECT_EQ(Health(stranger), 1);
}

TEST_F(HealthCommandTest, InferenceServerIsProbedWithTheCaAlone) {
  Serve(/*tls=*/true, ClientCertPolicy::kVerifyIfGiven);
  EXPECT_EQ(Health({"--tls-ca=" + ca_file_}), 0);
  // A server whose certificate is not from the CA given is not trusted.
  const std::string other_ca_file = dir_.File("other-ca.crt");
  testing::WriteBytes(other_ca_file, other_ca_->ca().cert_pem);
  EXPECT_EQ(Health({"--tls-ca=" + other_ca_file}), 1);
}

TEST_F(HealthCommandTest, NothingListeningFailsWithinTheTimeout) {
  Serve(/*tls=*/false);
  const std::string addr = addr_;
  server_->Shutdown();
  server_.reset();
  const absl::Time start = absl::Now();
  EXPECT_EQ(HealthCommand({"--addr=" + addr, "--timeout=2"}), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(HealthCommandTest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(HealthCommand({}), 2);
  EXPECT_EQ(HealthCommand({"--addr=nohostport"}), 2);
  EXPECT_EQ(HealthCommand({"--addr=127.0.0.1:1", "--timeout=0"}), 2);
  EXPECT_EQ(HealthCommand({"--addr=127.0.0.1:1", "--tls-ca=" + dir_.File("missing.crt")}), 2);
  std::vector<std::string> half = {"--addr=127.0.0.1:1", "--tls-ca=" + ca_file_};
  half.push_back(Client(*ca_, "worker")[1]);  // --tls-cert without --tls-key
  EXPECT_EQ(HealthCommand(half), 2);
  EXPECT_EQ(HealthCommand({"--help"}), 0);
}

}  // namespace
}  // namespace dtrain::launcher
