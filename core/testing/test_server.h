// TestServer: a real ardmad Server on 127.0.0.1:0 for service tests, with helpers to open
// clients and read the server's counters. Owns the server; clients it returns are the caller's.
#ifndef ARDMA_CORE_TESTING_TEST_SERVER_H_
#define ARDMA_CORE_TESTING_TEST_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/client/client.h"
#include "core/server/server.h"

namespace ardma::testing {

// 64 MiB of memory, two workers, loopback with an ephemeral port.
ServerOptions TestServerOptions();

// The transport the tests' clients use: $ARDMA_TEST_TRANSPORT, "tcp" (the default), "unix" (the
// server's Unix-domain socket: TestServerOptions gives each server one, TestServer::NewClient uses
// it), "ucx" (UCX over shared memory), "ucx_tcp" (UCX over its TCP transport; for the UCX ones
// UCX_TLS is set too) or "cluster" (tcp; a suite built on ServiceFixture runs over a 3-server
// cluster: core/testing/service_fixture.h).
// ctest runs a suite registered with TRANSPORTS once per transport (cmake/ArdmaHelpers.cmake), so
// one test file covers every transport.
std::string TestTransport();
// Pins UCX to the test transport's transports (unless the caller set UCX_TLS), before the first
// UCX context of the process is made; servers started as processes afterwards inherit it.
void ApplyTestTransport();
// The address a client of the test transport connects to: `server_address`, or ucx://that. Not for
// the unix transport (it aborts): suites run over unix connect with TestServer::NewClient.
std::string ClientAddress(const std::string& server_address);

class TestServer {
 public:
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(
      const ServerOptions& options = TestServerOptions());

  // A client over the test transport (TestTransport()).
  absl::StatusOr<std::unique_ptr<Client>> NewClient(const ClientOptions& options = {}) const;
  Server& server() { return *server_; }
  std::string address() const { return server_->address(); }

 private:
  explicit TestServer(std::unique_ptr<Server> server) : server_(std::move(server)) {}
  std::unique_ptr<Server> server_;
};

// For suites that share one server (SetUpTestSuite): starts it with `memory_size` bytes and
// returns it with a client; both live until the caller deletes them.
std::pair<TestServer*, Client*> StartSuiteServer(uint64_t memory_size);

// The value of STATS counter `name`; NotFound if the server has no such counter.
absl::StatusOr<uint64_t> StatValue(Client& client, std::string_view name);

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_TEST_SERVER_H_
