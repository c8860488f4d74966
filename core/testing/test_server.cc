#include "core/testing/test_server.h"

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace ardma::testing {

ServerOptions TestServerOptions() {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.memory_size = 64 << 20;
  o.handler.workers = 2;
  return o;
}

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(const ServerOptions& options) {
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, Server::Start(options));
  return std::unique_ptr<TestServer>(new TestServer(std::move(server)));
}

absl::StatusOr<std::unique_ptr<Client>> TestServer::NewClient(const ClientOptions& options) const {
  return Client::Connect(server_->address(), options);
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
