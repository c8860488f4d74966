#include "core/testing/test_server.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "core/ucx/ucx_context.h"

namespace ardma::testing {

void ApplyTestTransport() {
  static const bool applied = [] {
    std::string transport = TestTransport();
    const char* tls = transport == "ucx" ? "shm,self" : transport == "ucx_tcp" ? "tcp,self" : "";
    if (*tls != '\0') ::setenv("UCX_TLS", tls, /*overwrite=*/0);
    return true;
  }();
  (void)applied;
}

ServerOptions TestServerOptions() {
  ApplyTestTransport();
  ServerOptions o;
  if (TestTransport() == "unix") {
    // Each server its own socket: tests run in parallel, and a suite may start several.
    static std::atomic<int> next{0};
    o.unix_socket = absl::StrCat("/tmp/ardma_test.", ::getpid(), ".", next++, ".sock");
  }
  o.listen = "127.0.0.1:0";
  o.memory_size = 64 << 20;
  o.handler.workers = 2;
  return o;
}

std::string TestTransport() {
  const char* transport = std::getenv("ARDMA_TEST_TRANSPORT");
  return transport != nullptr && *transport != '\0' ? transport : "tcp";
}

std::string ClientAddress(const std::string& server_address) {
  ApplyTestTransport();
  if (TestTransport() == "unix") {
    std::fprintf(stderr,
                 "ClientAddress: the unix transport needs the server's socket: use "
                 "TestServer::NewClient\n");
    std::abort();
  }
  return TestTransport().rfind("ucx", 0) != 0 ? server_address
                                              : absl::StrCat(ToAbsl(kUcxPrefix), server_address);
}

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(const ServerOptions& options) {
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, Server::Start(options));
  return std::unique_ptr<TestServer>(new TestServer(std::move(server)));
}

absl::StatusOr<std::unique_ptr<Client>> TestServer::NewClient(const ClientOptions& options) const {
  if (TestTransport() == "unix") return Client::Connect("unix:" + server_->unix_socket(), options);
  return Client::Connect(ClientAddress(server_->address()), options);
}

std::pair<TestServer*, Client*> StartSuiteServer(uint64_t memory_size) {
  ServerOptions options = TestServerOptions();
  options.memory_size = memory_size;
  absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(options);
  if (!server.ok()) return {nullptr, nullptr};
  absl::StatusOr<std::unique_ptr<Client>> client = (*server)->NewClient();
  if (!client.ok()) return {server->release(), nullptr};
  return {server->release(), client->release()};
}

absl::StatusOr<uint64_t> StatValue(Client& client, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(auto stats, client.Stats());
  for (const auto& [n, v] : stats) {
    if (n == name) return v;
  }
  return absl::NotFoundError(absl::StrCat("no counter ", ToAbsl(name)));
}

}  // namespace ardma::testing
