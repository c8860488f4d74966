// ServiceFixture: the base of a service's suite (DHT, lock, list) that runs over one server and,
// registered with TRANSPORTS cluster (cmake/ArdmaHelpers.cmake), over a cluster of three servers
// with a real etcd — one suite, not a copy per setting.
//
// The suite builds its service clients on servers() (and NewServers() for more clients): over one
// server that is the server alone; over the cluster it is a cluster::Cluster routing each call by
// slot. client_ is a client of the server alone, or of the cluster's first member, for what
// inspects one server's memory; a test that only makes sense on one server says so with
// ARDMA_SKIP_ON_CLUSTER(why).
#ifndef ARDMA_CORE_TESTING_SERVICE_FIXTURE_H_
#define ARDMA_CORE_TESTING_SERVICE_FIXTURE_H_

#include <memory>

#include "core/client/servers.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/server_fixture.h"
#include "gtest/gtest.h"

namespace ardma::testing {

inline bool OnCluster() { return TestTransport() == "cluster"; }

// Round trips so far of every server's client in `servers`.
inline uint64_t RoundTrips(Servers& servers) {
  absl::StatusOr<std::vector<Client*>> all = servers.All();
  EXPECT_TRUE(all.ok()) << all.status();
  uint64_t total = 0;
  if (all.ok()) {
    for (Client* client : *all) total += client->counters().round_trips.load();
  }
  return total;
}

#define ARDMA_SKIP_ON_CLUSTER(why) \
  if (::ardma::testing::OnCluster()) GTEST_SKIP() << "one server only: " << (why)

template <typename Base>
class ServiceFixture : public ServerFixture<Base> {
 protected:
  // (Re)starts the server, or the cluster's three, each with `options`.
  void StartServices(const ServerOptions& options = TestServerOptions()) {
    servers_.reset();
    if (!OnCluster()) {
      this->StartServer(options);
      servers_ = std::make_unique<OneServer>(this->client_.get());
      return;
    }
    this->client_.reset();
    cluster_.reset();
    cluster_ = std::make_unique<ClusterFixture>(3, options);
    ASSERT_TRUE(cluster_->ok()) << cluster_->why();
    this->client_ = NewClient();
    servers_ = NewServers();
    ASSERT_NE(servers_, nullptr);
  }
  Servers* servers() { return servers_.get(); }
  // The address a tool is given (--server): the server's, for the test transport, or the
  // cluster's etcd://HOST:PORT/NAME.
  std::string ToolAddress() const {
    return OnCluster() ? cluster_->address() : ClientAddress(this->server_->address());
  }
  // Another connection to the same service: its own Client, or its own Cluster.
  std::unique_ptr<Servers> NewServers() {
    if (!OnCluster()) return std::make_unique<OneServer>(NewClient());
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = cluster_->ConnectOverTestTransport();
    EXPECT_TRUE(routed.ok()) << routed.status();
    return routed.ok() ? std::unique_ptr<Servers>(*std::move(routed)) : nullptr;
  }
  // A client of the server (the cluster's first member).
  std::unique_ptr<Client> NewClient() {
    if (!OnCluster()) return ServerFixture<Base>::NewClient();
    absl::StatusOr<std::unique_ptr<Client>> c = cluster_->server(0).NewClient();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<ClusterFixture> cluster_;  // over the cluster transport
  std::unique_ptr<Servers> servers_;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_SERVICE_FIXTURE_H_
