// The delay proxy passes bytes intact, in order, both ways, and adds its delay to round trips.
#include "bench/delay_proxy.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "core/testing/run_command.h"
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

TEST(DelayProxyTest, CommandLineForwardsUntilSigterm) {
  auto server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok());
  std::string out;
  EXPECT_EQ(testing::RunCommand(testing::BinDir() + "/ardma-delay-proxy --help", &out), 0);
  EXPECT_NE(out.find("--delay"), std::string::npos);
  EXPECT_EQ(testing::RunCommand(testing::BinDir() + "/ardma-delay-proxy --delay x", &out), 2);
  // Start it, read the address it prints, ping through it, stop it with SIGTERM.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string binary = testing::BinDir() + "/ardma-delay-proxy";
  std::string target = (*server)->address();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::execl(binary.c_str(), binary.c_str(), "--delay", "1ms", "--target", target.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  FILE* proxy = ::fdopen(fds[0], "r");
  ASSERT_NE(proxy, nullptr);
  char line[128] = {};
  ASSERT_NE(std::fgets(line, sizeof(line), proxy), nullptr);
  std::string address(line);
  address.erase(address.find_last_not_of("\n") + 1);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Ping().ok());
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);  // a clean exit
  std::fclose(proxy);
}

}  // namespace
}  // namespace ardma::bench
