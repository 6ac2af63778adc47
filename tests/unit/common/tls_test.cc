// The TLS pieces in one process: certificates from CertAuthority, the checks of
// --tls-* files, the flag rules, and a real handshake over loopback that must not
// depend on the dialled host name.
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/file_io.h"
#include "common/grpc_util.h"
#include "common/tls/cert_authority.h"
#include "common/tls/pem_check.h"
#include "common/tls/tls_flags.h"
#include "common/tls/token_file.h"
#include "dtrain/v1/scheduler.grpc.pb.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain {
namespace {

const absl::Duration kDay = absl::Hours(24);

struct Job {
  tls::CertAuthority ca;
  tls::KeyAndCert node;
};

Job MakeJob(const std::string& name) {
  absl::StatusOr<tls::CertAuthority> ca = tls::CertAuthority::Create(name, kDay);
  EXPECT_TRUE(ca.ok()) << ca.status();
  // No IP or "localhost" SAN on purpose: the handshake below dials 127.0.0.1.
  absl::StatusOr<tls::KeyAndCert> node = ca->Issue(tls::LeafName(Role::kWorker, 0, name), {}, kDay);
  EXPECT_TRUE(node.ok()) << node.status();
  return Job{*std::move(ca), *std::move(node)};
}

TransportSecurity Tls(const Job& trust, const tls::KeyAndCert* me) {
  TransportSecurity t;
  t.tls = true;
  t.ca_pem = trust.ca.ca().cert_pem;
  if (me != nullptr) {
    t.cert_pem = me->cert_pem;
    t.key_pem = me->key_pem;
  }
  return t;
}

TEST(CertAuthorityTest, IssuedCertificatesVerifyAgainstTheirCaOnly) {
  Job a = MakeJob("a");
  Job b = MakeJob("b");
  EXPECT_TRUE(tls::CheckPemFiles({"c", "k", "ca", a.node.cert_pem, a.node.key_pem, a.ca.ca().cert_pem}).ok());
  absl::Status other = tls::CheckPemFiles({"c", "k", "ca", b.node.cert_pem, b.node.key_pem, a.ca.ca().cert_pem});
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.message().find("--tls-cert c does not verify against --tls-ca ca"), std::string::npos) << other;
  absl::Status wrong_key = tls::CheckPemFiles({"c", "k", "ca", a.node.cert_pem, b.node.key_pem, a.ca.ca().cert_pem});
  EXPECT_NE(wrong_key.message().find("--tls-key k is not the key of"), std::string::npos) << wrong_key;
  EXPECT_FALSE(tls::CheckPemFiles({"c", "k", "ca", "junk", a.node.key_pem, a.ca.ca().cert_pem}).ok());
  // The CA loads back from its files, and issues certificates that verify.
  absl::StatusOr<tls::CertAuthority> again = tls::CertAuthority::Load(a.ca.ca().key_pem, a.ca.ca().cert_pem);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<tls::KeyAndCert> more = again->Issue("server-3.a", {"10.0.0.7", "node7.example"}, kDay);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_TRUE(tls::CheckPemFiles({"c", "k", "ca", more->cert_pem, more->key_pem, a.ca.ca().cert_pem}).ok());
  EXPECT_FALSE(tls::CertAuthority::Load(b.ca.ca().key_pem, a.ca.ca().cert_pem).ok());
}

TEST(TlsFlagsTest, WhatEachUseNeeds) {
  testing::TempDir dir;
  Job a = MakeJob("a");
  ASSERT_TRUE(tls::WriteKeyAndCert(dir.path(), "n", a.node).ok());
  ASSERT_TRUE(tls::WriteKeyAndCert(dir.path(), "ca", a.ca.ca()).ok());
  const TlsFlags all{dir.File("n.crt"), dir.File("n.key"), dir.File("ca.crt"), false};
  absl::StatusOr<TransportSecurity> t = LoadTransportSecurity(all, TlsUse::kClusterNode);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->tls);
  EXPECT_EQ(t->client_certs, ClientCertPolicy::kRequire);

  EXPECT_FALSE(LoadTransportSecurity(TlsFlags{}, TlsUse::kClusterNode)->tls);
  EXPECT_FALSE(LoadTransportSecurity(TlsFlags{"", "", "", true}, TlsUse::kClusterNode)->tls);
  auto message = [](const TlsFlags& f, TlsUse use) {
    return std::string(LoadTransportSecurity(f, use).status().message());
  };
  EXPECT_NE(message({all.cert, all.key, "", false}, TlsUse::kClusterNode).find("--tls-ca"), std::string::npos);
  EXPECT_NE(message({all.cert, "", all.ca, false}, TlsUse::kClusterNode).find("--tls-cert needs --tls-key"),
            std::string::npos);
  EXPECT_NE(message({"", "", all.ca, false}, TlsUse::kClusterNode).find("--tls-cert and --tls-key"), std::string::npos);
  EXPECT_NE(message({all.cert, all.key, all.ca, true}, TlsUse::kClusterNode).find("--insecure with"),
            std::string::npos);
  // An inference server may go without a CA (tokens), a client without a certificate.
  EXPECT_TRUE(LoadTransportSecurity({all.cert, all.key, "", false}, TlsUse::kInferenceServer).ok());
  EXPECT_EQ(LoadTransportSecurity(all, TlsUse::kInferenceServer)->client_certs, ClientCertPolicy::kVerifyIfGiven);
  EXPECT_TRUE(LoadTransportSecurity({"", "", all.ca, false}, TlsUse::kClient).ok());
}

TEST(TlsFlagsTest, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"}) EXPECT_TRUE(IsLoopbackHost(h)) << h;
  for (const char* h : {"0.0.0.0", "::", "", "10.0.0.1", "node1"}) EXPECT_FALSE(IsLoopbackHost(h)) << h;
}

TEST(TokenFileTest, ReadsTokensAndRefusesShortOnes) {
  testing::TempDir dir;
  ASSERT_TRUE(
      WriteFileAtomically(dir.File("ok"), "# comment\n\n  0123456789abcdef0123  \nsecond-token-long-enough\n").ok());
  absl::StatusOr<std::vector<std::string>> tokens = ReadTokenFile(dir.File("ok"), "--auth-token-file");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"0123456789abcdef0123", "second-token-long-enough"}));
  ASSERT_TRUE(WriteFileAtomically(dir.File("short"), "hunter2\n").ok());
  EXPECT_NE(ReadTokenFile(dir.File("short"), "--auth-token-file").status().message().find("a token of 7 characters"),
            std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(dir.File("empty"), "# nothing\n").ok());
  EXPECT_NE(ReadTokenFile(dir.File("empty"), "--x").status().message().find("no token"), std::string::npos);
}

// A server on 127.0.0.1 with `server` credentials whose methods are all unimplemented:
// a call that gets UNIMPLEMENTED passed the handshake. OK then, else the call's error.
grpc::Status Handshake(const TransportSecurity& server, const TransportSecurity& client) {
  v1::Scheduler::Service empty;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(server), &port);
  builder.RegisterService(&empty);
  std::unique_ptr<grpc::Server> s = builder.BuildAndStart();
  EXPECT_NE(port, 0);
  auto stub =
      v1::Scheduler::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), ChannelCredentialsFor(client)));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
  v1::GetStatusResponse resp;
  grpc::Status status = stub->GetStatus(&ctx, v1::GetStatusRequest(), &resp);
  s->Shutdown(DeadlineAfter(absl::ZeroDuration()));
  return status.error_code() == grpc::StatusCode::UNIMPLEMENTED ? grpc::Status::OK : status;
}

TEST(CredentialsTest, MutualTlsChecksTheCaButNotTheDialledHost) {
  Job a = MakeJob("a");
  Job b = MakeJob("b");
  absl::StatusOr<tls::KeyAndCert> a2 = a.ca.Issue("server-0.a", {}, kDay);
  ASSERT_TRUE(a2.ok());
  // Neither certificate names 127.0.0.1: the chain to the job's CA is what counts.
  grpc::Status ok = Handshake(Tls(a, &*a2), Tls(a, &a.node));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_FALSE(Handshake(Tls(a, &*a2), Tls(a, nullptr)).ok()) << "no client certificate";
  EXPECT_FALSE(Handshake(Tls(a, &*a2), Tls(a, &b.node)).ok()) << "client certificate from another CA";
  EXPECT_FALSE(Handshake(Tls(a, &*a2), TransportSecurity{}).ok()) << "plaintext client";
  EXPECT_FALSE(Handshake(Tls(b, &b.node), Tls(a, &a.node)).ok()) << "server from another CA";
  // kVerifyIfGiven (the inference server): no certificate is let through the handshake,
  // a bad one is not.
  TransportSecurity infer = Tls(a, &*a2);
  infer.client_certs = ClientCertPolicy::kVerifyIfGiven;
  EXPECT_TRUE(Handshake(infer, Tls(a, nullptr)).ok());
  EXPECT_FALSE(Handshake(infer, Tls(a, &b.node)).ok());
}

}  // namespace
}  // namespace dtrain
