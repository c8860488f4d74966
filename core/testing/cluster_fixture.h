// ClusterFixture: a cluster for a test — a real etcd (EtcdProcess) and `n` in-process servers
// (TestServer) registered as its members s0, s1, ... with the slots even over them. The servers
// are registered by hand (what `ardmad --cluster` writes), so they live in the test's process;
// tools/cluster_test.cc covers ardmad's own joining.
#ifndef ARDMA_CORE_TESTING_CLUSTER_FIXTURE_H_
#define ARDMA_CORE_TESTING_CLUSTER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "core/cluster/etcd_client.h"
#include "core/testing/etcd_process.h"
#include "core/testing/test_server.h"

namespace ardma::testing {

class ClusterFixture {
 public:
  // Check ok() after: false (with why()) if etcd or a server did not start.
  explicit ClusterFixture(int n, uint64_t memory_size = 32u << 20);
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }

  // etcd://HOST:PORT/c1
  std::string address() const;
  cluster::EtcdClient& etcd() { return *etcd_client_; }
  EtcdProcess& etcd_process() { return etcd_; }
  TestServer& server(int i) { return *servers_[i]; }
  // The index of the server with member id `id` ("s2" -> 2).
  static int IndexOf(const std::string& id) { return std::stoi(id.substr(1)); }
  // Registers `id` at `address` (again), as a server's membership would.
  void Register(const std::string& id, const std::string& address);

 private:
  EtcdProcess etcd_;
  std::unique_ptr<cluster::EtcdClient> etcd_client_;
  std::vector<std::unique_ptr<TestServer>> servers_;
  std::string why_;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_CLUSTER_FIXTURE_H_
