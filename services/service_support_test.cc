#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "core/active/local_context.h"
#include "core/context/lock_owner.h"
#include "core/memory/region.h"
#include "gtest/gtest.h"
#include "services/lock_word.h"
#include "services/root_cache.h"

namespace ardma {
namespace {

TEST(StaleRootTest, MarksWithoutChangingCodeOrMessage) {
  absl::Status s = StaleRootError(absl::InvalidArgumentError("no list header at address 64"));
  EXPECT_TRUE(IsStaleRoot(s));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "no list header at address 64");
  EXPECT_FALSE(IsStaleRoot(absl::InvalidArgumentError("no list header at address 64")));
  EXPECT_FALSE(IsStaleRoot(absl::OkStatus()));
}

TEST(RootCacheTest, RetriesOnceWithAFreshResolutionWhenTheCachedEntryIsStale) {
  RootCache<uint64_t> cache;
  cache.Store("a", 100);
  std::vector<std::optional<uint64_t>> seen;
  absl::StatusOr<int> r =
      cache.Run<int>("a", [&](std::optional<uint64_t> cached) -> absl::StatusOr<int> {
        seen.push_back(cached);
        if (cached.has_value()) return StaleRootError(absl::DataLossError("stale"));
        cache.Store("a", 200);
        return 7;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 7);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::optional<uint64_t>(100));
  EXPECT_EQ(seen[1], std::nullopt);
  EXPECT_EQ(cache.Find("a"), std::optional<uint64_t>(200));
}

TEST(RootCacheTest, RetriesAreBoundedAndOnlyForTheStaleSignal) {
  RootCache<uint64_t> cache;
  int calls = 0;
  auto always_stale = [&](std::optional<uint64_t>) -> absl::StatusOr<int> {
    ++calls;
    return StaleRootError(absl::DataLossError("stale"));
  };
  // Nothing cached: a fresh resolution that fails is a real error, not retried.
  EXPECT_FALSE(cache.Run<int>("a", always_stale).ok());
  EXPECT_EQ(calls, 1);
  // Cached: one retry, then the error stands.
  cache.Store("a", 1);
  calls = 0;
  EXPECT_TRUE(IsStaleRoot(cache.Run<int>("a", always_stale).status()));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.Find("a"), std::nullopt);
  // Another error with the same code but no payload is not retried.
  cache.Store("a", 1);
  calls = 0;
  absl::StatusOr<int> r = cache.Run<int>("a", [&](std::optional<uint64_t>) -> absl::StatusOr<int> {
    ++calls;
    return absl::DataLossError("stale");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.Find("a"), std::optional<uint64_t>(1));
}

TEST(RootCacheTest, UpdateChangesOnlyPresentEntries) {
  RootCache<uint64_t> cache;
  cache.Update("x", [](uint64_t& v) { v = 5; });
  EXPECT_EQ(cache.Find("x"), std::nullopt);
  cache.Store("x", 1);
  cache.Update("x", [](uint64_t& v) { v += 5; });
  EXPECT_EQ(cache.Find("x"), std::optional<uint64_t>(6));
}

// A heap with an owner table (core/context/lock_owner.h) of four slots, and contexts that take
// lock words as the owners of slots 1 and 2 or anonymously.
class LockWordTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kTable = 4096, kWord = 64;

  void SetUp() override {
    regions_.Add(*Region::Create({.size = 1 << 20}));
    uint64_t table[3 + 4] = {owner::kTableMagic, 4, 1, 0, 1, 1, 0};  // slots 1 and 2 live
    ASSERT_TRUE(
        anonymous_.Write(kTable, std::string_view(reinterpret_cast<char*>(table), sizeof table))
            .ok());
    first_ex_.owner = {owner::MakeToken(1, 0), kTable};
    second_ex_.owner = {owner::MakeToken(2, 0), kTable};
  }
  // Ends the owner of `slot` (its connection closed), as ardmad does.
  void End(uint64_t slot) {
    ASSERT_TRUE(anonymous_.FetchAdd(owner::SlotAddress(kTable, slot), 1).ok());
  }
  // A taker that gives up after `wait` (its request's deadline).
  absl::StatusOr<uint64_t> TakeAs(Execution& ex, absl::Duration wait) {
    ex.deadline = absl::Now() + wait;
    LocalContext ctx(&ex);
    return AcquireLockWord(ctx, kWord, "t");
  }

  RegionTable regions_;
  Execution anonymous_ex_{.regions = &regions_};
  Execution first_ex_{.regions = &regions_};
  Execution second_ex_{.regions = &regions_};
  LocalContext anonymous_{&anonymous_ex_};
  LocalContext first_{&first_ex_};
};

TEST_F(LockWordTest, HolderValuesNameTheOwnerAndDifferEveryTime) {
  uint64_t a = NewHolderValue(first_), b = NewHolderValue(first_);
  EXPECT_NE(a, b);
  EXPECT_EQ(owner::TokenSlot(a), 1u);
  EXPECT_EQ(a & 1, 1u);
  EXPECT_EQ(owner::TokenSlot(NewHolderValue(anonymous_)), 0u);
}

TEST_F(LockWordTest, ALiveHolderKeepsItsWordHoweverLongItHoldsIt) {
  absl::StatusOr<uint64_t> held = AcquireLockWord(first_, kWord, "t");
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(*anonymous_.ReadU64(kWord), *held);
  // Far longer than the old patience of a second: the holder is slow, not dead.
  absl::StatusOr<uint64_t> waiter = TakeAs(second_ex_, absl::Milliseconds(1500));
  EXPECT_EQ(waiter.status().code(), absl::StatusCode::kDeadlineExceeded) << waiter.status();
  EXPECT_EQ(*anonymous_.ReadU64(kWord), *held);
  EXPECT_TRUE(ReleaseLockWord(first_, kWord, *held, "t").ok());
  EXPECT_EQ(*anonymous_.ReadU64(kWord), 0u);
}

TEST_F(LockWordTest, AWordWhoseHolderEndedIsTakenOver) {
  absl::StatusOr<uint64_t> held = AcquireLockWord(first_, kWord, "t");
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_FALSE(*HolderEnded(first_, *held));
  End(1);
  EXPECT_TRUE(*HolderEnded(first_, *held));
  absl::StatusOr<uint64_t> second = TakeAs(second_ex_, absl::Seconds(5));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(owner::TokenSlot(*second), 2u);
  // The first holder finds out when it releases.
  absl::Status late = ReleaseLockWord(first_, kWord, *held, "t");
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(late.message(), "t: a lock was taken over while held");
  LocalContext taker(&second_ex_);
  EXPECT_TRUE(ReleaseLockWord(taker, kWord, *second, "t").ok());
  EXPECT_EQ(*anonymous_.ReadU64(kWord), 0u);
}

TEST_F(LockWordTest, ANewOwnerOfTheSameSlotIsNotTheOldHolder) {
  absl::StatusOr<uint64_t> held = AcquireLockWord(first_, kWord, "t");
  ASSERT_TRUE(held.ok());
  End(1);
  End(1);  // the slot's next connection: live again, one generation on
  EXPECT_TRUE(*HolderEnded(first_, *held));
  EXPECT_FALSE(*SlotVacant(first_, 1));  // but a slot-only word would wait for it
  End(1);
  EXPECT_TRUE(*SlotVacant(first_, 1));
  EXPECT_FALSE(*SlotVacant(first_, 2));
}

TEST_F(LockWordTest, AnonymousHoldersAndSlotsPastTheTable) {
  // Anonymous values are never taken over: no server vouches for their holder's death.
  absl::StatusOr<uint64_t> held = AcquireLockWord(anonymous_, kWord, "t");
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(*HolderEnded(first_, *held));
  EXPECT_EQ(TakeAs(second_ex_, absl::Milliseconds(200)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // A slot the table does not have (a value from an older, larger table) has no live owner.
  EXPECT_TRUE(*HolderEnded(first_, owner::MakeToken(9, 0)));
  EXPECT_TRUE(*SlotVacant(first_, 9));
  // A context that knows no table cannot tell: it waits.
  EXPECT_FALSE(*HolderEnded(anonymous_, owner::MakeToken(9, 0)));
}

}  // namespace
}  // namespace ardma
