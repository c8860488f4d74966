// ClusterFixture: a cluster for a test — a real etcd (EtcdProcess) and `n` in-process servers
// (TestServer) registered as its members s0, s1, ... with the slots even over them, each able to
// call the others (Context::CallPeer). The servers
// are registered by hand (what `ardmad --cluster` writes), so they live in the test's process;
// tools/cluster_test.cc covers ardmad's own joining.
#ifndef ARDMA_CORE_TESTING_CLUSTER_FIXTURE_H_
#define ARDMA_CORE_TESTING_CLUSTER_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/etcd_client.h"
#include "core/cluster/peer_calls.h"
#include "core/cluster/router.h"
#include "core/cluster/slot.h"
#include "core/server/slot_replication.h"
#include "core/testing/etcd_process.h"
#include "core/testing/test_server.h"
#include "gtest/gtest.h"

namespace ardma::testing {

class ClusterFixture {
 public:
  // Check ok() after: false (with why()) if etcd or a server did not start.
  // `n` servers; the slots even over the first `owners` of them (all: -1); the others are
  // members without slots (for adding them).
  // With `replicas`, each owner's slots are replicated to that many of the other owners
  // (SlotMap::WithReplicas), as `ardma cluster create --replicas` does. The members call each
  // other over `peer_transport` ("tcp" or "ucx"; empty: UCX when the tests' clients use it).
  // What runs beside each server of a cluster with replicas: its replica filler
  // (services/replica_filler.h, which core cannot name), given the server's parts; started once
  // the server took its map, and released (stopping it) before the server stops.
  struct Member {
    std::string id;
    Server* server = nullptr;
    cluster::PeerCalls* peers = nullptr;
    SlotReplication* replication = nullptr;
  };
  using Companion = std::function<std::shared_ptr<void>(const Member&)>;
  ClusterFixture(int n, ServerOptions options, int owners = -1, uint32_t replicas = 0,
                 std::string peer_transport = "", Companion companion = nullptr);
  explicit ClusterFixture(int n, uint64_t memory_size = 32u << 20, int owners = -1);
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }

  // etcd://HOST:PORT/c1
  std::string address() const;
  cluster::EtcdClient& etcd() { return *etcd_client_; }
  EtcdProcess& etcd_process() { return etcd_; }
  TestServer& server(int i) { return *servers_[i]; }  // (not while stopped)
  // The index of the server with member id `id` ("s2" -> 2).
  static int IndexOf(const std::string& id) { return std::stoi(id.substr(1)); }
  // Registers `id` at `address` (again), as a server's membership would.
  void Register(const std::string& id, const std::string& address);
  // Server i comes back after a crash: a new server in its place, registered under its id at
  // its new address, serving the slots the map gives it. Its memory is lost, unless the
  // servers' options name a memory file: then server i keeps its memory in "<file>.<i>".
  absl::Status Restart(int i);
  // Server i dies (its clients' calls fail; its membership stays registered, as a crashed
  // member's does until its lease runs out).
  void Stop(int i);
  SlotReplication& replication(int i) { return *replications_[i]; }

  // A Cluster of it whose clients use the test transport (TestTransport(): tcp, or UCX).
  // refresh_interval as Cluster::Options has it (zero: the map is read again only when a server
  // redirects, so it is stale after a move until then).
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> ConnectOverTestTransport(
      absl::Duration refresh_interval = absl::Milliseconds(500)) const;
  // A client of each server on its own, to see where things are (null for one stopped).
  std::vector<std::unique_ptr<Client>> ClientOfEachServer();

 private:
  EtcdProcess etcd_;
  std::unique_ptr<cluster::EtcdClient> etcd_client_;
  // How each server's active code calls the others (Context::CallPeer), as ardmad --cluster's.
  std::vector<std::unique_ptr<cluster::PeerCalls>> peers_;  // outlive the servers
  std::vector<std::unique_ptr<SlotReplication>> replications_;  // likewise
  std::vector<std::unique_ptr<TestServer>> servers_;
  Companion companion_;
  std::vector<std::shared_ptr<void>> companions_;  // (before the servers: released first)
  ServerOptions ServerOwn(int i) const;  // server i's options
  void StartCompanion(int i);
  // What server i's membership does with `map` (ardmad --cluster): adopts its slots and takes
  // its replication roles.
  absl::Status TakeMap(int i, const cluster::SlotMap& map);
  ServerOptions options_;  // the servers'
  std::string why_;
};

// The base of a service suite over one 3-server cluster shared by the suite's tests:
//   class DhtClusterTest : public testing::ClusterSuite<::testing::TestWithParam<Mode>> {};
template <typename Base>
class ClusterSuite : public Base {
 protected:
  static void SetUpTestSuite() { fixture_ = new ClusterFixture(3); }
  static void TearDownTestSuite() {
    delete fixture_;
    fixture_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(fixture_->ok()) << fixture_->why(); }
  inline static ClusterFixture* fixture_ = nullptr;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_CLUSTER_FIXTURE_H_
