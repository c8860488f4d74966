// The admin's planning and locking: a rebalance plan is even and moves as little as possible; one
// administrator at a time holds a cluster (a real etcd).
#include "core/cluster/admin.h"

#include <map>
#include <set>

#include "core/testing/etcd_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cluster {
namespace {

using ::testing::HasSubstr;

// The map after the moves, checking that each move takes slots its giver owns.
SlotMap Apply(SlotMap map, const std::vector<Move>& moves) {
  for (const Move& m : moves) {
    for (uint32_t s : m.slots) EXPECT_EQ(map.Owner(s), m.from) << s;
    map = map.WithSlots(m.slots, m.to);
  }
  return map;
}

TEST(PlanRebalanceTest, AddingAServerMovesOnlyItsShareAndEndsEven) {
  SlotMap two = SlotMap::Even({"a", "b"});
  absl::StatusOr<std::vector<Move>> moves = PlanRebalance(two, {"a", "b", "c"});
  ASSERT_TRUE(moves.ok()) << moves.status();
  size_t moved = 0;
  for (const Move& m : *moves) {
    EXPECT_EQ(m.to, "c");
    moved += m.slots.size();
  }
  EXPECT_EQ(moved, 5461u);  // c's share, and nothing else
  SlotMap three = Apply(two, *moves);
  EXPECT_EQ(three.epoch(), two.epoch() + moves->size());
  EXPECT_EQ(three.SlotCount("a"), 5462u);
  EXPECT_EQ(three.SlotCount("b"), 5461u);
  EXPECT_EQ(three.SlotCount("c"), 5461u);
  // Already even: nothing to do.
  EXPECT_TRUE(PlanRebalance(three, {"a", "b", "c"})->empty());
}

TEST(PlanRebalanceTest, RemovingAServerGivesAllItsSlotsAway) {
  SlotMap three = SlotMap::Even({"a", "b", "c"});
  absl::StatusOr<std::vector<Move>> moves = PlanRebalance(three, {"a", "c"});
  ASSERT_TRUE(moves.ok());
  SlotMap two = Apply(three, *moves);
  EXPECT_EQ(two.SlotCount("b"), 0u);
  EXPECT_EQ(two.SlotCount("a"), 8192u);
  EXPECT_EQ(two.SlotCount("c"), 8192u);
  EXPECT_EQ(PlanRebalance(three, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SlotMapTest, WithSlotsMergesRangesAndListsThemBack) {
  SlotMap map = SlotMap::AllTo("a").WithSlots({5, 6, 7, 100}, "b");
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_EQ(map.ranges().size(), 5u);  // a 0-4, b 5-7, a 8-99, b 100, a 101-
  EXPECT_THAT(map.SlotsOf("b"), ::testing::ElementsAre(5, 6, 7, 100));
  EXPECT_TRUE(SlotMap::Parse(map.ToJson()).ok());
}

TEST(AdminLockTest, OneAdministratorAtATime) {
  testing::EtcdProcess etcd;
  ASSERT_FALSE(etcd.endpoint().empty());
  std::unique_ptr<EtcdClient> client = *EtcdClient::Connect(etcd.endpoint());
  {
    absl::StatusOr<std::unique_ptr<AdminLock>> first = AdminLock::Acquire(*client, "c1", "alice");
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<std::unique_ptr<AdminLock>> second = AdminLock::Acquire(*client, "c1", "bob");
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(), HasSubstr("(alice)"));
    EXPECT_TRUE(AdminLock::Acquire(*client, "c2", "bob").ok());  // another cluster
  }
  EXPECT_TRUE(AdminLock::Acquire(*client, "c1", "bob").ok());  // released
}

}  // namespace
}  // namespace ardma::cluster
