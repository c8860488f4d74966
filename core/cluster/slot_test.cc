#include "core/cluster/slot.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cluster {
namespace {

using ::testing::HasSubstr;

TEST(SlotTest, HashIsCrc16XmodemAsRedisClusterUses) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the CRC's check value
  EXPECT_EQ(Crc16("foo") % kSlots, 12182u);  // CLUSTER KEYSLOT foo
  EXPECT_EQ(Crc16(""), 0);
}

// CRC-16/XMODEM a bit at a time, as its definition reads.
uint16_t BitwiseCrc16(std::string_view bytes, uint16_t crc = 0) {
  for (unsigned char byte : bytes) {
    crc ^= static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

TEST(SlotTest, EightBytesAtATimeIsTheSameCrcAsABitAtATime) {
  std::string bytes;
  uint32_t x = 12345;
  for (int len = 0; len < 80; ++len) {
    x = x * 1103515245u + 12345u;
    bytes.push_back(static_cast<char>(x >> 16));
    for (size_t from = 0; from <= bytes.size(); from += 3) {
      std::string_view part = std::string_view(bytes).substr(from);
      ASSERT_EQ(Crc16(part), BitwiseCrc16(part)) << "length " << part.size();
      ASSERT_EQ(Crc16(part, 0xbeef), BitwiseCrc16(part, 0xbeef)) << "length " << part.size();
    }
  }
}

TEST(SlotTest, SlotsSpreadEvenlyAndHashTagsKeepKeysTogether) {
  std::array<int, 4> quarters{};
  for (int i = 0; i < 100000; ++i) ++quarters[SlotOf("table", absl::StrCat("key", i)) / (kSlots / 4)];
  for (int q : quarters) EXPECT_NEAR(q, 25000, 1250) << "quarters of the slot space";
  EXPECT_EQ(SlotOf("t", "{user7}.name"), SlotOf("t", "{user7}.mail"));
  EXPECT_NE(SlotOf("t", "a"), SlotOf("u", "a"));   // the namespace counts
  EXPECT_EQ(SlotOf("t", "{}x"), SlotOf("t", "{}x"));  // an empty tag: the whole key
  EXPECT_LT(SlotOf("t", "anything"), kSlots);
}

TEST(SlotMapTest, RangesMoveAndMergeAtTheNextEpoch) {
  SlotMap one = SlotMap::AllTo("s1");
  EXPECT_EQ(one.epoch(), 1u);
  EXPECT_EQ(one.Owner(0), "s1");
  EXPECT_EQ(one.Owner(kSlots - 1), "s1");
  SlotMap two = one.WithRange(8192, kSlots - 1, "s2");
  EXPECT_EQ(two.epoch(), 2u);
  EXPECT_EQ(two.ranges(), (std::vector<SlotRange>{{0, 8191, "s1"}, {8192, kSlots - 1, "s2"}}));
  EXPECT_EQ(two.Owner(8191), "s1");
  EXPECT_EQ(two.Owner(8192), "s2");
  SlotMap three = two.WithRange(100, 199, "s3");
  EXPECT_EQ(three.ranges(), (std::vector<SlotRange>{{0, 99, "s1"},
                                                    {100, 199, "s3"},
                                                    {200, 8191, "s1"},
                                                    {8192, kSlots - 1, "s2"}}));
  EXPECT_EQ(three.Servers(), (std::vector<std::string>{"s1", "s2", "s3"}));
  // Given back, the pieces merge again.
  SlotMap back = three.WithRange(100, 199, "s1");
  EXPECT_EQ(back.ranges(), two.ranges());
  EXPECT_EQ(back.epoch(), 4u);
  absl::StatusOr<SlotMap> parsed = SlotMap::Parse(three.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ranges(), three.ranges());
  EXPECT_EQ(parsed->epoch(), three.epoch());
}

TEST(SlotMapTest, EvenSplitsTheSlotsInContiguousNearlyEqualRanges) {
  SlotMap three = SlotMap::Even({"a", "b", "c"});
  EXPECT_EQ(three.ranges(), (std::vector<SlotRange>{{0, 5460, "a"}, {5461, 10921, "b"},
                                                    {10922, kSlots - 1, "c"}}));
  EXPECT_EQ(three.SlotCount("a") + three.SlotCount("b") + three.SlotCount("c"), kSlots);
  EXPECT_EQ(three.SlotCount("nobody"), 0u);
  EXPECT_TRUE(SlotMap::Parse(three.ToJson()).ok());
  EXPECT_EQ(SlotMap::Even({"only"}).ranges(), SlotMap::AllTo("only").ranges());
}

TEST(SlotMapTest, AnInconsistentMapIsRefusedSayingWhy) {
  auto error = [](std::string_view json) { return std::string(SlotMap::Parse(json).status().message()); };
  EXPECT_THAT(error("not json"), HasSubstr("not a JSON object"));
  EXPECT_THAT(error(R"({"ranges": []})"), HasSubstr("epoch"));
  EXPECT_THAT(error(R"({"epoch": 1})"), HasSubstr("ranges"));
  EXPECT_THAT(error(R"({"epoch": 1, "ranges": [{"first": 0, "last": 16383}]})"),
              HasSubstr("\"server\""));
  EXPECT_THAT(error(R"({"epoch": 1, "ranges": [{"first": 0, "last": 9000, "server": "a"},
                                                {"first": 8000, "last": 16383, "server": "b"}]})"),
              HasSubstr("slot 8000 has two owners"));
  EXPECT_THAT(error(R"({"epoch": 1, "ranges": [{"first": 0, "last": 99, "server": "a"},
                                                {"first": 200, "last": 16383, "server": "b"}]})"),
              HasSubstr("slot 100 has no owner"));
  EXPECT_THAT(error(R"({"epoch": 1, "ranges": [{"first": 0, "last": 100, "server": "a"}]})"),
              HasSubstr("slot 101 has no owner"));
  EXPECT_THAT(error(R"({"epoch": 1, "ranges": [{"first": 0, "last": 16384, "server": "a"}]})"),
              HasSubstr("not within 0-16383"));
  EXPECT_THAT(error(R"({"epoch": 1, "ranges": [{"first": 0, "last": 16383, "server": ""}]})"),
              HasSubstr("name no server"));
}

TEST(SlotMapTest, ReplicasFollowTheOwnersAndSurviveMovesAndTheJsonForm) {
  SlotMap three = SlotMap::Even({"a", "b", "c"});
  EXPECT_TRUE(three.replicas().empty());
  EXPECT_EQ(three.ToJson().find("replicas"), std::string::npos);  // absent when there are none

  absl::StatusOr<SlotMap> one = three.WithReplicas(1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->epoch(), three.epoch());
  EXPECT_EQ(one->ReplicasOf("a"), (std::vector<std::string>{"b"}));
  EXPECT_EQ(one->ReplicasOf("b"), (std::vector<std::string>{"c"}));
  EXPECT_EQ(one->ReplicasOf("c"), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(one->ReplicasOf("nobody").empty());
  absl::StatusOr<SlotMap> two = three.WithReplicas(2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->ReplicasOf("b"), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(three.WithReplicas(3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(SlotMap::AllTo("x").WithReplicas(1).status().message(),
              HasSubstr("need more than 1 server"));

  absl::StatusOr<SlotMap> parsed = SlotMap::Parse(one->ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->replicas(), one->replicas());

  // Slots that move keep their new owner's replicas; an owner left with no slots keeps none.
  SlotMap moved = one->WithRange(0, 5460, "b");
  EXPECT_EQ(moved.ReplicasOf("b"), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(moved.ReplicasOf("a").empty());
  EXPECT_EQ(moved.ReplicasOf("c"), (std::vector<std::string>{"a"}));
  SlotMap by_slots = one->WithSlots(one->SlotsOf("c"), "a");
  EXPECT_TRUE(by_slots.ReplicasOf("c").empty());
  EXPECT_EQ(by_slots.ReplicasOf("a"), (std::vector<std::string>{"b"}));
}

TEST(SlotMapTest, FailoverPromotesAReplicaDropsTheDeadAndPlacesReturningMembers) {
  absl::StatusOr<SlotMap> one = SlotMap::Even({"a", "b", "c"}).WithReplicas(1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->replication(), 1u);
  absl::StatusOr<SlotMap> parsed = SlotMap::Parse(one->ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->replication(), 1u);
  EXPECT_FALSE(one->FailedOver({"a", "b", "c"}).has_value());  // all live: nothing to do

  // a dies: its replica b takes its slots (at the next epoch); c loses its replica a.
  std::optional<SlotMap> without_a = one->FailedOver({"b", "c"});
  ASSERT_TRUE(without_a.has_value());
  EXPECT_EQ(without_a->epoch(), one->epoch() + 1);
  for (uint32_t s : one->SlotsOf("a")) ASSERT_EQ(without_a->Owner(s), "b") << s;
  EXPECT_EQ(without_a->ranges().front(), (SlotRange{0, one->SlotsOf("b").back(), "b"}));
  EXPECT_EQ(without_a->SlotCount("c"), one->SlotCount("c"));
  EXPECT_EQ(without_a->ReplicasOf("b"), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(without_a->ReplicasOf("c").empty());
  EXPECT_TRUE(without_a->ReplicasOf("a").empty());
  EXPECT_FALSE(without_a->FailedOver({"b", "c"}).has_value());

  // Only a replica its owner has filled is promoted: b, still being filled, is not.
  SlotMap::Pairs synced = {{"b", "c"}, {"c", "a"}};
  std::optional<SlotMap> unfilled_heir = one->FailedOver({"b", "c"}, &synced);
  ASSERT_TRUE(unfilled_heir.has_value());  // (c still loses its replica a)
  EXPECT_EQ(unfilled_heir->Owner(0), "a") << "a's slots wait for a rather than go to b unfilled";
  synced.emplace("a", "b");
  EXPECT_EQ(one->FailedOver({"b", "c"}, &synced)->Owner(0), "b");

  // a comes back (empty): it replicates the owner without a replica, c.
  std::optional<SlotMap> back = without_a->FailedOver({"a", "b", "c"});
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ReplicasOf("c"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(back->ReplicasOf("b"), (std::vector<std::string>{"c"}));
  EXPECT_EQ(back->SlotCount("a"), 0u);
  EXPECT_EQ(back->replication(), 1u);
  EXPECT_FALSE(back->FailedOver({"a", "b", "c"}).has_value());

  // An owner whose replicas are all dead keeps its slots (down until it returns).
  std::optional<SlotMap> two_dead = one->FailedOver({"c"});
  ASSERT_TRUE(two_dead.has_value());
  EXPECT_EQ(two_dead->Owner(0), "a");  // a's replica b is dead too
  EXPECT_EQ(two_dead->SlotCount("c"), one->SlotCount("b") + one->SlotCount("c"));  // b's heir
  // No replicas at all (replication 0): a dead owner changes nothing.
  EXPECT_FALSE(SlotMap::Even({"a", "b"}).FailedOver({"b"}).has_value());
  EXPECT_FALSE(SlotMap::Even({"a", "b"}).FailedOver({"a", "b", "x"}).has_value());
}

TEST(SlotMapTest, ABadReplicaListIsRefusedSayingWhy) {
  auto error = [](const std::string& replicas) {
    std::string json = absl::StrCat(
        R"({"epoch": 1, "ranges": [{"first": 0, "last": 16383, "server": "a"}], "replicas": )",
        replicas, "}");
    return std::string(SlotMap::Parse(json).status().message());
  };
  EXPECT_THAT(error(R"(["b"])"), HasSubstr("not an object"));
  EXPECT_THAT(error(R"({"a": "b"})"), HasSubstr("not a list"));
  EXPECT_THAT(error(R"({"a": [7]})"), HasSubstr("not an id"));
  EXPECT_THAT(error(R"({"a": ["a"]})"), HasSubstr("its own replica"));
  EXPECT_THAT(error(R"({"a": ["b", "b"]})"), HasSubstr("named twice"));
  EXPECT_EQ(error(R"({"a": []})"), "");  // an empty list: no replicas
}

}  // namespace
}  // namespace ardma::cluster
