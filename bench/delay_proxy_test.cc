// The delay proxy passes bytes intact, in order, both ways, and adds its delay to round trips.
#include "bench/delay_proxy.h"

#include "core/testing/test_server.h"
#include "gtest/gtest.h"

namespace ardma::bench {
namespace {

TEST(DelayProxyTest, ForwardsIntactAndAddsTheDelayToEveryRoundTrip) {
  auto server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok());
  const absl::Duration delay = absl::Milliseconds(5);
  absl::StatusOr<std::unique_ptr<DelayProxy>> proxy = DelayProxy::Start((*server)->address(), delay);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect((*proxy)->address());
  ASSERT_TRUE(client.ok()) << client.status();
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  EXPECT_EQ(*(*client)->Echo(big), big);  // several chunks, in order, both ways
  for (int i = 0; i < 5; ++i) {
    absl::Time start = absl::Now();
    ASSERT_TRUE((*client)->Ping().ok());
    // A lower bound only (never assert an upper bound on a shared machine).
    EXPECT_GE(absl::Now() - start, 2 * delay);
  }
  (*proxy)->Stop();
  EXPECT_FALSE((*client)->Ping().ok());  // the proxy is gone: no path to the server
}

}  // namespace
}  // namespace ardma::bench
