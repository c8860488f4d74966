#include <optional>
#include <string>

#include "core/active/local_context.h"
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

TEST(HolderWatchTest, AbandonedOnlyAfterTheSameValueOutlastsThePatience) {
  HolderWatch watch(absl::Milliseconds(20));
  EXPECT_FALSE(watch.Abandoned(5));
  EXPECT_FALSE(watch.Abandoned(5));  // seen, but not for long yet
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_FALSE(watch.Abandoned(6));  // a new value: the holder is alive, the wait starts over
  EXPECT_FALSE(watch.Abandoned(6));
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(watch.Abandoned(6));
  watch.Reset();
  EXPECT_FALSE(watch.Abandoned(6));
}

class LockWordTest : public ::testing::Test {
 protected:
  void SetUp() override { regions_.Add(*Region::Create({.size = 1 << 20})); }
  RegionTable regions_;
  Execution ex_{.regions = &regions_};
  LocalContext ctx_{&ex_};
};

TEST_F(LockWordTest, TakesReleasesAndTakesOverAnAbandonedWord) {
  absl::StatusOr<uint64_t> nonce = AcquireLockWord(ctx_, 64, absl::Milliseconds(10), "t");
  ASSERT_TRUE(nonce.ok()) << nonce.status();
  EXPECT_EQ(*nonce & 1, 1u);
  EXPECT_EQ(*ctx_.ReadU64(64), *nonce);
  // Held and never released: a second taker waits out the patience, then takes it over.
  absl::StatusOr<uint64_t> second = AcquireLockWord(ctx_, 64, absl::Milliseconds(10), "t");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*second, *nonce);
  // The first holder finds out when it releases.
  absl::Status late = ReleaseLockWord(ctx_, 64, *nonce, "t");
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(late.message(), "t: a lock was taken over while held");
  EXPECT_TRUE(ReleaseLockWord(ctx_, 64, *second, "t").ok());
  EXPECT_EQ(*ctx_.ReadU64(64), 0u);
}

}  // namespace
}  // namespace ardma
