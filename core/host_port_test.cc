#include "core/host_port.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace ardma {
namespace {

TEST(HostPortTest, ParsesHostsPortsAndBracketedIpv6) {
  absl::StatusOr<HostPort> a = ParseHostPort("127.0.0.1:15712");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 15712);
  EXPECT_EQ(ParseHostPort("localhost:0")->port, 0);
  absl::StatusOr<HostPort> v6 = ParseHostPort("[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "[::1]:80");
  EXPECT_EQ(a->ToString(), "127.0.0.1:15712");
}

TEST(HostPortTest, RejectsMalformedAddresses) {
  for (const char* bad : {"", "15712", ":15712", "host:", "host:65536", "host:-1", "::1:80",
                          "[::1:80", "host:12ab"}) {
    EXPECT_EQ(ParseHostPort(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  // A cluster's address where one server's is wanted says so.
  absl::Status cluster = ParseHostPort("etcd://127.0.0.1:2379/c1").status();
  EXPECT_EQ(cluster.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cluster.message().find("names a cluster, not one server"), std::string_view::npos);
}

TEST(HostPortTest, DefaultServerComesFromTheEnvironment) {
  ::unsetenv("ARDMA_SERVER");
  ::unsetenv("ARDMA_CLUSTER");
  EXPECT_EQ(DefaultServerAddress(), "127.0.0.1:15712");
  ::setenv("ARDMA_CLUSTER", "etcd://127.0.0.1:2379/c1", 1);
  EXPECT_EQ(DefaultServerAddress(), "etcd://127.0.0.1:2379/c1");
  ::setenv("ARDMA_SERVER", "10.1.2.3:9", 1);  // a server named outright comes first
  EXPECT_EQ(DefaultServerAddress(), "10.1.2.3:9");
  ::unsetenv("ARDMA_SERVER");
  ::unsetenv("ARDMA_CLUSTER");
}

}  // namespace
}  // namespace ardma
