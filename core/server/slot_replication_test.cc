// SlotReplication on its own (the cluster suites run it between servers): a replica applies each
// slot's writes once and in order, refusing after a gap; a primary forwards a slot's writes in
// the order it gave them out, whatever order their runs end in; a fenced member orders nothing; a
// promoted member continues its old primary's order; replicas that lack slots wait to be filled,
// and a replica takes no order it has no base in.
#include "core/server/slot_replication.h"

#include <thread>

#include "absl/strings/str_cat.h"

#include "absl/time/clock.h"
#include "core/slots.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

// Records what reaches the replicas; the first forwarded write can be held back.
class RecordingPeers final : public PeerCaller {
 public:
  absl::StatusOr<std::string> Call(const PeerTarget&, std::string_view, std::string_view,
                                   absl::Time) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<std::string> Replicate(const std::string& member, std::string_view function,
                                        std::string_view args, absl::Time) override {
    absl::StatusOr<std::pair<ReplicaOrder, std::string_view>> order = DecodeReplicaOrder(args);
    if (!order.ok()) return order.status();
    absl::MutexLock lock(&mu_);
    seen_.push_back(absl::StrCat(member, " ", std::string(function), " #", order->first.seq, " ",
                                 std::string(order->second)));
    if (member == down_) return absl::UnavailableError("down");
    if (!refusal_.ok()) return refusal_;
    return std::string();
  }
  std::vector<std::string> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  void set_refusal(absl::Status status) {
    absl::MutexLock lock(&mu_);
    refusal_ = std::move(status);
  }
  void set_down(std::string member) {
    absl::MutexLock lock(&mu_);
    down_ = std::move(member);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
  std::string down_ ABSL_GUARDED_BY(mu_);
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);  // every replica's answer, unless OK
};

TEST(ReplicaOrderTest, RoundTripsAndRefusesNonsense) {
  std::string bytes = EncodeReplicaOrder({.slot = 77, .incarnation = 5, .seq = 9}, "args");
  absl::StatusOr<std::pair<ReplicaOrder, std::string_view>> back = DecodeReplicaOrder(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->first.slot, 77u);
  EXPECT_EQ(back->first.incarnation, 5u);
  EXPECT_EQ(back->first.seq, 9u);
  EXPECT_EQ(back->second, "args");
  EXPECT_EQ(DecodeReplicaOrder("short").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DecodeReplicaOrder(EncodeReplicaOrder({.slot = 16384, .incarnation = 5, .seq = 1},
                                                     "")).ok());
  EXPECT_FALSE(DecodeReplicaOrder(EncodeReplicaOrder({.slot = 1, .incarnation = 5, .seq = 0},
                                                     "")).ok());
}

TEST(SlotReplicationTest, AReplicaAppliesEachWriteOnceInOrderAndRefusesAfterAGap) {
  RecordingPeers peers;
  SlotReplication replica(&peers);
  replica.SetRoles({}, std::vector<bool>(16384, true));
  const uint64_t primary = 42;
  auto admit = [&](uint32_t slot, uint64_t incarnation, uint64_t seq) {
    return replica.Admit({.slot = slot, .incarnation = incarnation, .seq = seq});
  };
  EXPECT_FALSE(admit(3, primary, 1).ok()) << "no write is taken before the primary's base";
  replica.SetBase({.slot = 3, .incarnation = primary, .seq = 0});
  replica.SetBase({.slot = 4, .incarnation = primary, .seq = 0});
  ASSERT_TRUE(*admit(3, primary, 1));
  replica.Applied({.slot = 3, .incarnation = primary, .seq = 1});
  EXPECT_FALSE(*admit(3, primary, 1)) << "a retry of an applied write is not applied again";
  ASSERT_TRUE(*admit(3, primary, 2));
  replica.Applied({.slot = 3, .incarnation = primary, .seq = 2});
  absl::StatusOr<bool> gap = admit(3, primary, 4);  // #3 never came
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(gap.status().message().find("missed writes"), std::string::npos) << gap.status();
  EXPECT_TRUE(*admit(4, primary, 1)) << "each slot has its own order";
  // Another order (a primary that restarted, or was promoted) is a gap until a fill's base, even
  // at its #1: its copy may hold keys no write of that order made.
  absl::StatusOr<bool> other = admit(4, primary + 1, 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("another primary"), std::string::npos) << other.status();
  replica.SetBase({.slot = 4, .incarnation = primary + 1, .seq = 0});
  EXPECT_TRUE(*admit(4, primary + 1, 1));
}

TEST(SlotReplicationTest, APrimaryForwardsASlotsWritesInTheOrderItGaveThemOut) {
  RecordingPeers peers;
  SlotReplication primary(&peers);
  primary.SetRoles({"r1", "r2"}, {});
  absl::StatusOr<Replication::Ticket> first = primary.Order(9);
  absl::StatusOr<Replication::Ticket> second = primary.Order(9);
  absl::StatusOr<Replication::Ticket> other = primary.Order(10);
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_EQ(first->seq, 1u);
  EXPECT_EQ(second->seq, 2u);
  EXPECT_EQ(other->seq, 1u);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  // The second write's run ended first: it waits for the first to be forwarded.
  absl::Status second_forwarded;
  std::thread late([&] { second_forwarded = primary.Forward(*second, "f", "b", deadline); });
  // (Another slot's write does not wait for slot 9's.)
  EXPECT_TRUE(primary.Forward(*other, "f", "c", deadline).ok());
  EXPECT_TRUE(primary.Forward(*first, "f", "a", deadline).ok());
  late.join();
  EXPECT_TRUE(second_forwarded.ok()) << second_forwarded;
  EXPECT_EQ(peers.seen(), (std::vector<std::string>{"r1 f #1 c", "r2 f #1 c", "r1 f #1 a",
                                                    "r2 f #1 a", "r1 f #2 b", "r2 f #2 b"}));
}

TEST(SlotReplicationTest, AWriteThatAReplicaDidNotApplyIsNotAcknowledged) {
  RecordingPeers peers;
  SlotReplication primary(&peers);
  primary.SetRoles({"r1", "r2"}, {});
  peers.set_down("r1");
  absl::StatusOr<Replication::Ticket> ticket = primary.Order(1);
  ASSERT_TRUE(ticket.ok());
  absl::Status forwarded = primary.Forward(*ticket, "f", "a", absl::Now() + absl::Seconds(30));
  EXPECT_EQ(forwarded.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(forwarded.message().find("replica r1"), std::string::npos) << forwarded;
  EXPECT_EQ(peers.seen().size(), 2u) << "the other replica still gets it";
  // The slot goes on: its next write is forwarded (the replica that missed one refuses it).
  absl::StatusOr<Replication::Ticket> next = primary.Order(1);
  ASSERT_TRUE(next.ok());
  peers.set_down("");
  EXPECT_TRUE(primary.Forward(*next, "f", "b", absl::Now() + absl::Seconds(30)).ok());
}

TEST(SlotReplicationTest, AFencedMemberOrdersNoWriteOneWithoutReplicasDoes) {
  RecordingPeers peers;
  SlotReplication member(&peers);
  // No live replica (the map dropped it): the write takes its place and is acknowledged here.
  absl::StatusOr<Replication::Ticket> alone = member.Order(1);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(member.Forward(*alone, "f", "a", absl::Now() + absl::Seconds(30)).ok());
  EXPECT_TRUE(peers.seen().empty());
  // A replica placed later is filled with that slot, before the slot's next write.
  member.SetRoles({"r1"}, {}, {1});
  std::optional<std::pair<std::string, std::vector<uint32_t>>> fill =
      member.NextFill(absl::Now());
  ASSERT_TRUE(fill.has_value());
  EXPECT_EQ(fill->second, (std::vector<uint32_t>{1}));
  member.Filled("r1", {1});
  member.SetWritableUntil(absl::Now() + absl::Hours(1));
  EXPECT_TRUE(member.Order(1).ok());
  member.SetWritableUntil(absl::Now() - absl::Milliseconds(1));
  absl::StatusOr<Replication::Ticket> fenced = member.Order(1);
  EXPECT_EQ(fenced.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(fenced.status().message().find("fenced"), std::string::npos) << fenced.status();
}

TEST(SlotReplicationTest, APromotedMemberOrdersInItsOwnOrderOnceItsReplicasAreFilled) {
  RecordingPeers peers;
  SlotReplication member(&peers);
  std::vector<bool> replica_of(16384, false);
  replica_of[7] = replica_of[8] = true;
  member.SetRoles({"r1"}, replica_of, {100});
  const absl::Time soon = absl::Now() + absl::Seconds(30);
  std::optional<std::pair<std::string, std::vector<uint32_t>>> fill = member.NextFill(soon);
  ASSERT_TRUE(fill.has_value()) << "a new replica is filled with every slot, written or not";
  EXPECT_EQ(fill->first, "r1");
  EXPECT_EQ(fill->second, (std::vector<uint32_t>{100}));
  member.Filled("r1", {100});
  // As the replica of slot 7: writes #1 and #2 of an old primary's order, after its base.
  const uint64_t old_primary = 42;
  member.SetBase({.slot = 7, .incarnation = old_primary, .seq = 0});
  for (uint64_t seq : {1, 2}) {
    ASSERT_TRUE(*member.Admit({.slot = 7, .incarnation = old_primary, .seq = seq}));
    member.Applied({.slot = 7, .incarnation = old_primary, .seq = seq});
  }
  // Promoted to the owner of 7 and 8: their writes go in this member's own order, once its
  // replica is filled with them (both: slot 8's keys could have come in a fill).
  member.SetRoles({"r1"}, std::vector<bool>(16384, false), {7, 8, 100});
  EXPECT_EQ(member.Admit({.slot = 7, .incarnation = old_primary, .seq = 3}).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the old primary's late writes are not applied by its heir";
  absl::StatusOr<Replication::Ticket> early = member.Order(7);
  ASSERT_TRUE(slots::RedirectOf(early.status()).has_value()) << early.status();
  EXPECT_TRUE(slots::RedirectOf(early.status())->frozen) << "clients wait for the fill";
  EXPECT_FALSE(member.Order(8).ok());
  fill = member.NextFill(soon);
  ASSERT_TRUE(fill.has_value());
  EXPECT_EQ(fill->first, "r1");
  EXPECT_EQ(fill->second, (std::vector<uint32_t>{7, 8}));
  EXPECT_FALSE(member.Order(7).ok()) << "still being filled";
  EXPECT_EQ(member.StreamMarks({7})[0].incarnation, member.incarnation());
  EXPECT_EQ(member.StreamMarks({7})[0].seq, 0u);
  member.Filled("r1", {7, 8});
  absl::StatusOr<Replication::Ticket> next = member.Order(7);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->seq, 1u);
  ASSERT_TRUE(member.Forward(*next, "f", "x", soon).ok());
  EXPECT_EQ(peers.seen(), (std::vector<std::string>{"r1 f #1 x"}));
  EXPECT_TRUE(member.AwaitForwarded({7, 8}, soon));
  // A fill that failed waits again (its slot still refused); a replica dropped from the map is
  // not filled, and its slots take writes again.
  member.SetRoles({"r1", "r2"}, std::vector<bool>(16384, false), {7, 8, 100});
  fill = member.NextFill(soon);
  ASSERT_TRUE(fill.has_value());
  EXPECT_EQ(fill->first, "r2");
  EXPECT_EQ(fill->second, (std::vector<uint32_t>{7, 8, 100}));
  member.Unfilled("r2", {7, 8, 100});
  EXPECT_EQ(member.fills_waiting(), 3u);
  EXPECT_FALSE(member.Order(7).ok());
  member.SetRoles({"r1"}, std::vector<bool>(16384, false), {7, 8, 100});
  EXPECT_EQ(member.fills_waiting(), 0u);
  EXPECT_TRUE(member.Order(7).ok());
}

// With two replicas, the old primary's last write may have reached one and not the other (it was
// not acknowledged). The other is promoted; the one ahead must not take the new primary's writes
// as continuing what it holds (its #3 is not the new primary's #3): it takes nothing of the new
// order before a fill replaces its copy.
TEST(SlotReplicationTest, AReplicaAheadOfThePromotedOneTakesNothingBeforeItsFill) {
  RecordingPeers peers;
  SlotReplication promoted(&peers), ahead(&peers);
  std::vector<bool> slot7(16384, false);
  slot7[7] = true;
  const uint64_t old_primary = 42;
  for (SlotReplication* r : {&promoted, &ahead}) {
    r->SetRoles({}, slot7);
    r->SetBase({.slot = 7, .incarnation = old_primary, .seq = 0});
  }
  for (uint64_t seq : {1, 2, 3}) {
    for (SlotReplication* r : {&promoted, &ahead}) {
      if (r == &promoted && seq == 3) continue;  // #3 reached only one replica
      ASSERT_TRUE(*r->Admit({.slot = 7, .incarnation = old_primary, .seq = seq}));
      r->Applied({.slot = 7, .incarnation = old_primary, .seq = seq});
    }
  }
  promoted.SetRoles({"ahead"}, std::vector<bool>(16384, false), {7});
  std::optional<std::pair<std::string, std::vector<uint32_t>>> fill =
      promoted.NextFill(absl::Now());
  ASSERT_TRUE(fill.has_value());
  EXPECT_EQ(fill->second, (std::vector<uint32_t>{7}));
  const std::vector<ReplicaOrder> marks = promoted.StreamMarks({7});
  promoted.Filled("ahead", {7});
  absl::StatusOr<Replication::Ticket> first = promoted.Order(7);
  ASSERT_TRUE(first.ok()) << first.status();
  const ReplicaOrder write{.slot = 7, .incarnation = promoted.incarnation(), .seq = first->seq};
  EXPECT_EQ(ahead.Admit(write).status().code(), absl::StatusCode::kFailedPrecondition)
      << "before the fill's base";
  ahead.SetBase(marks[0]);  // (the fill: its copy replaced by the promoted one's)
  EXPECT_TRUE(*ahead.Admit(write));
}

TEST(SlotReplicationTest, AReplicaThatRefusesAfterAGapIsFilledAndThenTakesTheOrder) {
  RecordingPeers peers;
  SlotReplication primary(&peers);
  primary.SetRoles({"r1"}, {}, {4});
  ASSERT_TRUE(primary.NextFill(absl::Now()).has_value());  // r1 is new: filled first
  primary.Filled("r1", {4});
  peers.set_refusal(absl::FailedPreconditionError(
      absl::StrCat("this replica of slot 4 ", kMissedWrites, " (...)")));
  absl::StatusOr<Replication::Ticket> ticket = primary.Order(4);
  ASSERT_TRUE(ticket.ok());
  EXPECT_FALSE(primary.Forward(*ticket, "f", "a", absl::Now() + absl::Seconds(30)).ok());
  std::optional<std::pair<std::string, std::vector<uint32_t>>> fill =
      primary.NextFill(absl::Now());
  ASSERT_TRUE(fill.has_value()) << "the refusal asks for a fill";
  EXPECT_EQ(fill->second, (std::vector<uint32_t>{4}));

  primary.Filled("r1", {4});
  // The replica's side of a fill: the base, then the order from there.
  SlotReplication replica(&peers);
  replica.SetRoles({}, std::vector<bool>(16384, true));
  std::vector<ReplicaOrder> marks = primary.StreamMarks({4});
  absl::StatusOr<std::vector<ReplicaOrder>> decoded = DecodeReplicaBase(EncodeReplicaBase(marks));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 1u);
  EXPECT_EQ(decoded->front().seq, 1u);
  EXPECT_FALSE(replica.Admit({.slot = 4, .incarnation = marks[0].incarnation, .seq = 2}).ok());
  replica.SetBase(decoded->front());
  EXPECT_FALSE(*replica.Admit({.slot = 4, .incarnation = marks[0].incarnation, .seq = 1}));
  EXPECT_TRUE(*replica.Admit({.slot = 4, .incarnation = marks[0].incarnation, .seq = 2}));
  EXPECT_FALSE(DecodeReplicaBase("123").ok());
}

TEST(SlotReplicationTest, AMemberKnowsWhichSlotsItReplicates) {
  RecordingPeers peers;
  SlotReplication member(&peers);
  std::vector<bool> slots(16384, false);
  slots[5] = true;
  member.SetRoles({}, slots);
  EXPECT_TRUE(member.Replicates(5));
  EXPECT_FALSE(member.Replicates(6));
  EXPECT_FALSE(member.Replicates(16384));
}

}  // namespace
}  // namespace ardma
