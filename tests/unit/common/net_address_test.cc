#include "common/net_address.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/listen_failure.h"

namespace dtrain {
namespace {

TEST(NetAddressTest, JoinBracketsIpv6Only) {
  EXPECT_EQ(JoinHostPort("10.0.0.1", 9091), "10.0.0.1:9091");
  EXPECT_EQ(JoinHostPort("scheduler.svc", 80), "scheduler.svc:80");
  EXPECT_EQ(JoinHostPort("::1", 9091), "[::1]:9091");
  EXPECT_EQ(JoinHostPort("fd00:10:244::5", 7), "[fd00:10:244::5]:7");
  EXPECT_EQ(JoinHostPort("[::1]", 9091), "[::1]:9091");  // already bracketed
}

TEST(NetAddressTest, SplitIsTheInverseOfJoin) {
  for (const auto& [host, port] : std::vector<std::pair<std::string, int>>{
           {"10.0.0.1", 9091}, {"::1", 0}, {"fd00:10:244::5", 65535}, {"localhost", 1}}) {
    absl::StatusOr<HostPort> hp = SplitHostPort(JoinHostPort(host, port));
    ASSERT_TRUE(hp.ok()) << hp.status();
    EXPECT_EQ(hp->host, host);
    EXPECT_EQ(hp->port, port);
  }
}

TEST(NetAddressTest, SplitRejectsWhatItCannotRead) {
  for (const char* bad :
       {"::1:9091", "10.0.0.1", "[::1]", "[::1]9091", "[::1:9091", ":9091", "h:70000", "h:x", "h:-1", ""}) {
    absl::StatusOr<HostPort> hp = SplitHostPort(bad);
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(hp.status().message().find(std::string("'") + bad + "'"), std::string::npos) << hp.status();
  }
  EXPECT_NE(SplitHostPort("::1:9091").status().message().find("brackets"), std::string::npos);
}

TEST(NetAddressTest, LocalAddressTowardLoopbackIsLoopback) {
  EXPECT_EQ(LocalAddressToward("127.0.0.1").value_or("error"), "127.0.0.1");
  EXPECT_EQ(LocalAddressToward("localhost").value_or("error").substr(0, 3) == "127" ||
                LocalAddressToward("localhost").value_or("error") == "::1",
            true);
  if (::access("/proc/net/if_inet6", R_OK) == 0) {
    EXPECT_EQ(LocalAddressToward("::1").value_or("error"), "::1");
  }
  EXPECT_FALSE(LocalAddressToward("no-such-host.invalid").ok());
}

TEST(NetAddressTest, InterfaceAddressNamesTheInterfacesThereAre) {
  EXPECT_EQ(InterfaceAddress("lo").value_or("error"), "127.0.0.1");
  absl::StatusOr<std::string> none = InterfaceAddress("no-such-if0");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no-such-if0"), std::string::npos);
  EXPECT_NE(none.status().message().find("lo"), std::string::npos) << none.status();
}

// A port this process listens on: the failure text names us as its holder.
TEST(ListenFailureTest, NamesTheProcessHoldingThePort) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const std::string me = "pid " + std::to_string(::getpid()) + " (net_address_test)";
  EXPECT_EQ(ListeningProcess(port), me);
  const std::string text = DescribeListenFailure("127.0.0.1:" + std::to_string(port));
  EXPECT_NE(text.find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos) << text;
  EXPECT_NE(text.find("already in use by " + me), std::string::npos) << text;
  ::close(fd);
  EXPECT_EQ(ListeningProcess(port), "");
}

TEST(ListenFailureTest, AnAddressNotOfThisMachineIsSaidSo) {
  // 192.0.2.1 is TEST-NET-1: never a local address.
  const std::string text = DescribeListenFailure("192.0.2.1:4000");
  EXPECT_NE(text.find("assign requested address"), std::string::npos) << text;
}

}  // namespace
}  // namespace dtrain
