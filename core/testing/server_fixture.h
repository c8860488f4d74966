// ServerFixture: a GoogleTest fixture base that owns a TestServer and a first client.
#ifndef ARDMA_CORE_TESTING_SERVER_FIXTURE_H_
#define ARDMA_CORE_TESTING_SERVER_FIXTURE_H_

#include <memory>

#include "core/testing/test_server.h"
#include "gtest/gtest.h"

namespace ardma::testing {

// A GoogleTest fixture base (Base is ::testing::Test or ::testing::TestWithParam<...>) that owns
// a TestServer and a first client: StartServer(options) (re)starts it, NewClient() adds clients.
template <typename Base>
class ServerFixture : public Base {
 protected:
  void StartServer(const ServerOptions& options = TestServerOptions()) {
    client_.reset();
    server_.reset();
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = NewClient();
  }
  std::unique_ptr<Client> NewClient() {
    absl::StatusOr<std::unique_ptr<Client>> c = server_->NewClient();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_SERVER_FIXTURE_H_
