// The demo library (ardma-demo's list): one function, two modes, the round trips each costs.
#include <cstdlib>
#include <string>

#include "core/active/testdata/test_library.h"
#include "core/client/invoke.h"
#include "absl/strings/str_cat.h"
#include "core/testing/run_command.h"
#include "core/testing/server_fixture.h"
#include "core/testing/server_process.h"
#include "core/testing/test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/demo_library.h"

namespace ardma {
namespace {

using testing::U64At;
using testing::U64s;

class DemoTest : public testing::ServerFixture<::testing::Test> {
 protected:
  void SetUp() override { StartServer(); }
};

TEST_F(DemoTest, SameFunctionSameResultInBothModesWithExpectedRoundTrips) {
  const ActiveLibrary& demo = active_libraries::demo();
  constexpr uint64_t kLength = 50;
  absl::StatusOr<std::string> head =
      Invoke(*client_, Mode::kActive, demo, "demo.build_list", U64s({kLength}));
  ASSERT_TRUE(head.ok()) << head.status();
  std::string head_arg = head->substr(0, 8);

  uint64_t before = client_->counters().round_trips.load();
  absl::StatusOr<std::string> active =
      Invoke(*client_, Mode::kActive, demo, "demo.sum_list", head_arg);
  uint64_t active_rts = client_->counters().round_trips.load() - before;
  before = client_->counters().round_trips.load();
  absl::StatusOr<std::string> rdma = Invoke(*client_, Mode::kRdma, demo, "demo.sum_list", head_arg);
  uint64_t rdma_rts = client_->counters().round_trips.load() - before;

  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_TRUE(rdma.ok()) << rdma.status();
  EXPECT_EQ(*active, *rdma);
  EXPECT_EQ(U64At(*active, 0), kLength * (kLength + 1) / 2);
  EXPECT_EQ(U64At(*active, 1), kLength);
  EXPECT_EQ(active_rts, 1u);
  EXPECT_EQ(rdma_rts, kLength);  // one READ per node

  // Building in RDMA mode gives the same list shape, allocated with CAS from the client.
  absl::StatusOr<std::string> rdma_head =
      Invoke(*client_, Mode::kRdma, demo, "demo.build_list", U64s({10}));
  ASSERT_TRUE(rdma_head.ok()) << rdma_head.status();
  EXPECT_EQ(
      U64At(*Invoke(*client_, Mode::kActive, demo, "demo.sum_list", rdma_head->substr(0, 8)), 0),
      55u);
}

// The main job's demo (scripts/run.sh): the same walks over tcp and over UCX, side by side.
TEST(DemoProgramTest, WalksTheListOverTcpAndUcxSideBySide) {
  testing::ApplyTestTransport();
  ::setenv("UCX_TLS", "shm,self", /*overwrite=*/0);  // (the server inherits it)
  testing::ServerProcess daemon({"--memory", "32M"});
  ASSERT_FALSE(daemon.address().empty());
  std::string out;
  ASSERT_EQ(testing::RunCommand(absl::StrCat(testing::BinDir(), "/ardma-demo --server ",
                                             daemon.address(), " --length 20 --repeats 2"),
                                &out),
            0)
      << out;
  // Each row: transport, mode, the sum 1 + ... + 20, round trips per walk, latency.
  EXPECT_THAT(out, ::testing::ContainsRegex("tcp +rdma +210 +20\\.0 "));
  EXPECT_THAT(out, ::testing::ContainsRegex("tcp +active +210 +1\\.0 "));
  EXPECT_THAT(out, ::testing::ContainsRegex("ucx +rdma +210 +20\\.0 "));
  EXPECT_THAT(out, ::testing::ContainsRegex("ucx +active +210 +1\\.0 "));
  EXPECT_THAT(out, ::testing::HasSubstr("faster over tcp and "));
}

}  // namespace
}  // namespace ardma
