#include "core/memory/heap.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/active/local_context.h"
#include "core/memory/heap_layout.h"
#include "core/status_macros.h"
#include "core/testing/heap_churn.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

class HeapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_.Add(*Region::Create({.size = kSize}));
    ASSERT_TRUE(*heap::FormatIfNeeded(ctx_, kSize));
  }

  static constexpr uint64_t kSize = 4 << 20;
  RegionTable regions_;
  Execution ex_{.regions = &regions_};
  LocalContext ctx_{&ex_};
};

TEST_F(HeapTest, FormatOnlyOnceAndChecksSize) {
  EXPECT_FALSE(*heap::FormatIfNeeded(ctx_, kSize));
  EXPECT_EQ(heap::FormatIfNeeded(ctx_, kSize * 2).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(HeapTest, AllocationsAreAlignedDisjointAndReused) {
  std::vector<uint64_t> addrs;
  for (uint64_t size : {1, 8, 16, 17, 100, 4000, 70000}) {
    absl::StatusOr<uint64_t> a = heap::Allocate(ctx_, size);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(*a % 16, 0u);
    EXPECT_GE(*a, heap::kDataStart);
    EXPECT_GE(*heap::BlockCapacity(ctx_, *a), size);
    ASSERT_TRUE(ctx_.Write(*a, std::string(size, 'x')).ok());
    addrs.push_back(*a);
  }
  std::set<uint64_t> unique(addrs.begin(), addrs.end());
  EXPECT_EQ(unique.size(), addrs.size());
  ASSERT_TRUE(heap::Free(ctx_, addrs[4]).ok());
  EXPECT_EQ(*heap::Allocate(ctx_, 100), addrs[4]);  // same class: reused
}

TEST_F(HeapTest, FreeRejectsBadPointersAndDoubleFree) {
  uint64_t a = *heap::Allocate(ctx_, 32);
  EXPECT_EQ(heap::Free(ctx_, a + 16).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(heap::Free(ctx_, 12345).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(heap::Free(ctx_, a).ok());
  EXPECT_EQ(heap::Free(ctx_, a).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(HeapTest, ExhaustionIsResourceExhausted) {
  EXPECT_EQ(heap::Allocate(ctx_, kSize).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(heap::Allocate(ctx_, 1024).ok());
}

TEST_F(HeapTest, RootsCreateGetAndCompareAndSet) {
  EXPECT_EQ(heap::GetRoot(ctx_, "dht").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*heap::GetOrCreateRoot(ctx_, "dht", 777), 777u);
  EXPECT_EQ(*heap::GetOrCreateRoot(ctx_, "dht", 888), 777u);
  EXPECT_EQ(*heap::GetRoot(ctx_, "dht"), 777u);
  EXPECT_FALSE(heap::CompareAndSetRoot(ctx_, "dht", 1, 2)->swapped);
  EXPECT_TRUE(heap::CompareAndSetRoot(ctx_, "dht", 777, 2)->swapped);
  EXPECT_EQ(*heap::GetRoot(ctx_, "dht"), 2u);
  EXPECT_EQ(heap::GetRoot(ctx_, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(heap::GetRoot(ctx_, std::string(heap::kMaxRootName + 1, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(HeapTest, FindRootAnswersAMissingRootWithNothingNotAnError) {
  EXPECT_EQ(*heap::FindRoot(ctx_, "fence"), std::nullopt);
  ASSERT_TRUE(heap::GetOrCreateRoot(ctx_, "fence", 5).ok());
  EXPECT_EQ(*heap::FindRoot(ctx_, "fence"), 5u);
  ASSERT_TRUE(heap::CompareAndSetRoot(ctx_, "fence", 5, 6)->swapped);
  EXPECT_EQ(*heap::FindRoot(ctx_, "fence"), 6u);  // the value now
  ASSERT_TRUE(heap::DeleteRoot(ctx_, "fence").ok());
  EXPECT_EQ(*heap::FindRoot(ctx_, "fence"), std::nullopt);
  EXPECT_EQ(heap::FindRoot(ctx_, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(HeapTest, RootsAreUnlimitedLongNamedAndDeletable) {
  constexpr int kRoots = 10000;
  for (int i = 0; i < kRoots; ++i) {
    ASSERT_TRUE(heap::GetOrCreateRoot(ctx_, "root" + std::to_string(i), i).ok()) << i;
  }
  for (int i = 0; i < kRoots; i += 7) {
    EXPECT_EQ(*heap::GetRoot(ctx_, "root" + std::to_string(i)), static_cast<uint64_t>(i));
  }
  std::string long_name(heap::kMaxRootName, 'n');
  EXPECT_EQ(*heap::GetOrCreateRoot(ctx_, long_name, 9), 9u);
  EXPECT_EQ(*heap::GetRoot(ctx_, long_name), 9u);
  EXPECT_EQ(heap::GetRoot(ctx_, long_name + "n").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(heap::GetRoot(ctx_, std::string("a\0b", 3)).status().code(),
            absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(heap::DeleteRoot(ctx_, "root42").ok());
  EXPECT_EQ(heap::GetRoot(ctx_, "root42").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(heap::DeleteRoot(ctx_, "root42").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*heap::GetRoot(ctx_, "root43"), 43u);                  // its neighbours are untouched
  EXPECT_EQ(*heap::GetOrCreateRoot(ctx_, "root42", 4242), 4242u);  // and the name is free again
  EXPECT_EQ(*heap::GetRoot(ctx_, "root42"), 4242u);
  EXPECT_TRUE(heap::Check(ctx_)->errors.empty());

  // Listing by prefix: live roots only, each once.
  ASSERT_TRUE(heap::DeleteRoot(ctx_, "root43").ok());
  absl::StatusOr<std::vector<std::string>> listed = heap::ListRoots(ctx_, "root999");
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::sort(listed->begin(), listed->end());
  EXPECT_THAT(*listed, ::testing::ElementsAre("root999", "root9990", "root9991", "root9992",
                                              "root9993", "root9994", "root9995", "root9996",
                                              "root9997", "root9998", "root9999"));
  listed = heap::ListRoots(ctx_, "root");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), static_cast<size_t>(kRoots - 1));
  EXPECT_TRUE(std::find(listed->begin(), listed->end(), "root43") == listed->end());
}

// Many threads allocating, creating the same roots and freeing at once: no block handed out
// twice, and every racer sees the one winning root value.
TEST_F(HeapTest, ConcurrentAllocateFreeAndRootCreation) {
  constexpr int kThreads = 4;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<uint64_t> root_values(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Execution ex{.regions = &regions_};
      LocalContext ctx(&ex);
      root_values[t] = *heap::GetOrCreateRoot(ctx, "shared", 1000 + t);
      for (int i = 0; i < 2000; ++i) {
        uint64_t a = *heap::Allocate(ctx, 48);
        if (i % 2 == 0) {
          ASSERT_TRUE(heap::Free(ctx, a).ok());
        } else {
          got[t].push_back(a);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint64_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * 1000));
  for (uint64_t v : root_values) EXPECT_EQ(v, root_values[0]);
}

TEST_F(HeapTest, AHeapOfTheOldLayoutIsRefusedNamingBothVersions) {
  ASSERT_TRUE(ctx_.WriteU64(8, 1).ok());  // as layout version 1 wrote its header
  absl::StatusOr<bool> r = heap::FormatIfNeeded(ctx_, kSize);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("layout version 1"));
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("layout version 3"));
  EXPECT_EQ(heap::Allocate(ctx_, 16).status().code(), absl::StatusCode::kFailedPrecondition);
}

// An existing file's damaged header is refused, never silently re-formatted; a format that a
// crash interrupted (its mark still in place) is redone.
TEST_F(HeapTest, ADamagedHeaderOfAnExistingFileIsRefusedNotReformatted) {
  absl::StatusOr<uint64_t> kept = heap::Allocate(ctx_, 64);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(ctx_.Write(*kept, "precious").ok());
  ASSERT_TRUE(ctx_.WriteU64(0, 0).ok());  // 8 zero bytes over the magic
  absl::StatusOr<bool> r = heap::FormatIfNeeded(ctx_, kSize, /*keep_existing=*/true);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("--format"));
  EXPECT_EQ(*ctx_.Read(*kept, 8), "precious");  // nothing was erased

  ASSERT_TRUE(ctx_.WriteU64(0, heap::kFormattingMagic).ok());  // as a crash mid-format leaves it
  EXPECT_TRUE(*heap::FormatIfNeeded(ctx_, kSize, /*keep_existing=*/true));
  EXPECT_FALSE(*heap::FormatIfNeeded(ctx_, kSize, /*keep_existing=*/true));  // a heap again
}

// Layout version 2 kept class slots unchecked: such a heap is upgraded in place when opened (its
// data kept), and a damaged slot of either version is refused with nothing written.
TEST_F(HeapTest, AVersionTwoHeapIsUpgradedAndADamagedSlotRefused) {
  absl::StatusOr<uint64_t> kept = heap::Allocate(ctx_, 40);  // sets class 6's current slab
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(ctx_.Write(*kept, "precious").ok());
  const uint64_t slot = 64 + 8 * 6;
  uint64_t encoded = *ctx_.ReadU64(slot);
  uint64_t page_plus_one = encoded & ((uint64_t{1} << 40) - 1);
  ASSERT_NE(page_plus_one, 0u);
  ASSERT_NE(encoded, page_plus_one) << "the slot carries a check";
  for (int c = 0; c < 16; ++c) {  // as version 2 wrote them
    uint64_t w = *ctx_.ReadU64(64 + 8 * c);
    ASSERT_TRUE(ctx_.WriteU64(64 + 8 * c, w & ((uint64_t{1} << 40) - 1)).ok());
  }
  ASSERT_TRUE(ctx_.WriteU64(8, 2).ok());
  EXPECT_FALSE(*heap::FormatIfNeeded(ctx_, kSize, /*keep_existing=*/true));
  EXPECT_EQ(*ctx_.ReadU64(8), heap::kLayoutVersion);
  EXPECT_EQ(*ctx_.ReadU64(slot), encoded);
  EXPECT_EQ(*ctx_.Read(*kept, 8), "precious");
  EXPECT_TRUE(heap::Allocate(ctx_, 40).ok());

  for (uint64_t damage : {uint64_t{1}, uint64_t{0xff} << 40, uint64_t{1} << 63}) {
    uint64_t good = *ctx_.ReadU64(slot);
    ASSERT_TRUE(ctx_.WriteU64(slot, good ^ damage).ok());
    absl::StatusOr<bool> r = heap::FormatIfNeeded(ctx_, kSize, /*keep_existing=*/true);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(r.status().message()),
                ::testing::HasSubstr("current slab of size class 6 (offset 112)"));
    EXPECT_EQ(*ctx_.ReadU64(slot), good ^ damage) << "nothing is written";
    ASSERT_TRUE(ctx_.WriteU64(slot, good).ok());
  }
}

TEST_F(HeapTest, FreedMemoryServesEverySizeAndCheckAccountsForEveryByte) {
  // Fill the heap with small blocks, free them all, then take nearly all of it as one run.
  std::vector<uint64_t> small;
  for (;;) {
    absl::StatusOr<uint64_t> a = heap::Allocate(ctx_, 40);
    if (!a.ok()) {
      ASSERT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
      break;
    }
    small.push_back(*a);
  }
  absl::StatusOr<heap::HeapReport> full = heap::Check(ctx_);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(full->errors.empty()) << full->errors[0];
  EXPECT_EQ(full->slab_live_bytes, small.size() * 64);
  EXPECT_EQ(full->free_page_bytes, 0u);
  for (uint64_t a : small) ASSERT_TRUE(heap::Free(ctx_, a).ok());
  absl::StatusOr<uint64_t> big = heap::Allocate(ctx_, full->data_bytes * 9 / 10);
  ASSERT_TRUE(big.ok()) << big.status();
  heap::HeapReport r = *heap::Check(ctx_);
  EXPECT_TRUE(r.errors.empty()) << r.errors[0];
  EXPECT_EQ(r.run_live_bytes, *heap::BlockCapacity(ctx_, *big));
  EXPECT_EQ(r.live_bytes() + r.free_bytes() + r.orphaned_bytes + r.slab_overhead_bytes,
            r.data_bytes);
  ASSERT_TRUE(heap::Free(ctx_, *big).ok());
  EXPECT_EQ(heap::Free(ctx_, *big).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(heap::Check(ctx_)->live_bytes(), 0u);
}

// Allocate/free churn, sizes 16 B to 64 MiB (log-uniform), from several threads, until 20x the
// region has gone through: with live data under 60% of the region no allocation may fail; once
// everything is freed, one allocation of 90% of the region succeeds.
TEST(HeapChurnTest, NeverFailsUnderSixtyPercentLiveAndEndsWhole) {
  constexpr uint64_t kRegion = 1ull << 30;
  RegionTable regions;
  regions.Add(*Region::Create({.size = kRegion}));
  Execution ex{.regions = &regions};
  LocalContext setup(&ex);
  ASSERT_TRUE(*heap::FormatIfNeeded(setup, kRegion));
  constexpr int kThreads = 4;
  testing::ChurnShared shared;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Execution tex{.regions = &regions};
      LocalContext ctx(&tex);
      testing::ChurnWorker(ctx, {.region = kRegion, .max_size = 64 << 20, .seed = 1234u + t},
                           shared);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.failures.load(), 0u) << shared.FirstFailure();
  heap::HeapReport r = *heap::Check(setup);
  EXPECT_TRUE(r.errors.empty()) << r.errors[0];
  EXPECT_EQ(r.live_bytes(), 0u);
  EXPECT_TRUE(heap::Allocate(setup, kRegion * 9 / 10).ok());
}

// A Context whose client dies at its `steps`-th change of memory (write, CAS or fetch-add): that
// change and every later operation fail, as if the client had been killed just before it. It
// counts the bytes it reads (what an RDMA-mode client's READs would carry).
class DyingContext : public Context {
 public:
  DyingContext(Context& inner, int steps) : inner_(inner), steps_left_(steps) {}
  bool IsLocal() const override { return false; }  // the RDMA-mode path: reads, then CAS
  bool dead() const { return steps_left_ <= 0; }
  uint64_t bytes_read() const { return bytes_read_; }

 protected:
  absl::Status Step() {
    if (--steps_left_ <= 0) return absl::UnavailableError("client killed");
    return absl::OkStatus();
  }
  absl::Status DoReadBatch(std::span<const ReadOp> ops) override {
    if (dead()) return absl::UnavailableError("client killed");
    for (const ReadOp& op : ops) bytes_read_ += op.out.size();
    return inner_.ReadBatch(ops);
  }
  absl::Status DoWriteBatch(std::span<const WriteOp> ops) override {
    ARDMA_RETURN_IF_ERROR(Step());
    return inner_.WriteBatch(ops);
  }
  absl::StatusOr<CasResult> DoCompareAndSwap(RegionId region, uint64_t addr, uint64_t expected,
                                             uint64_t desired) override {
    ARDMA_RETURN_IF_ERROR(Step());
    return inner_.CompareAndSwap(addr, expected, desired, region);
  }
  absl::StatusOr<uint64_t> DoFetchAdd(RegionId region, uint64_t addr, uint64_t delta) override {
    ARDMA_RETURN_IF_ERROR(Step());
    return inner_.FetchAdd(addr, delta, region);
  }
  absl::StatusOr<std::string_view> DoView(RegionId, uint64_t, uint64_t) override {
    return absl::FailedPreconditionError("not local");
  }
  absl::StatusOr<std::string> DoCall(std::string_view, std::string_view) override {
    return absl::UnimplementedError("call");
  }
  absl::Status DoPark(std::string_view, const ParkOptions&) override {
    return absl::UnimplementedError("park");
  }
  absl::StatusOr<bool> DoResume(std::string_view) override {
    return absl::UnimplementedError("resume");
  }
  absl::Status DoOnClose(std::string_view, std::string_view, std::string_view) override {
    return absl::UnimplementedError("on close");
  }
  absl::StatusOr<bool> DoWake(std::string_view, std::string_view) override {
    return absl::UnimplementedError("wake");
  }
  absl::Status DoBackoff(absl::Duration) override { return absl::OkStatus(); }

 private:
  Context& inner_;
  int steps_left_;
  uint64_t bytes_read_ = 0;
};

TEST_F(HeapTest, ARefillAfterThePoolIsUsedUpReadsAFewDescriptorsNotTheWholeTable) {
  // Every page a 32-byte slab, then one block freed in each: an RDMA-mode client's allocations
  // now each need a refill that finds the next slab with a free block. Each search used to begin
  // at page 0 and read the whole descriptor table (64 KiB here; 2 MiB for 128 MiB of memory).
  std::map<uint64_t, uint64_t> one_per_page;
  for (;;) {
    absl::StatusOr<uint64_t> a = heap::Allocate(ctx_, 32);
    if (!a.ok()) {
      ASSERT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
      break;
    }
    one_per_page.emplace(*a / heap::kPageSize, *a);
  }
  ASSERT_GT(one_per_page.size(), 900u);
  for (const auto& [page, addr] : one_per_page) ASSERT_TRUE(heap::Free(ctx_, addr).ok());
  DyingContext remote(ctx_, INT_MAX);
  constexpr int kAllocations = 500;
  std::set<uint64_t> got;
  for (int i = 0; i < kAllocations; ++i) {
    absl::StatusOr<uint64_t> a = heap::Allocate(remote, 32);
    ASSERT_TRUE(a.ok()) << a.status();
    got.insert(*a);
  }
  EXPECT_EQ(got.size(), static_cast<size_t>(kAllocations));
  EXPECT_LT(remote.bytes_read() / kAllocations, 16u << 10)
      << "bytes read per allocation; the descriptor table is "
      << one_per_page.size() * heap::kDescriptorSize << " bytes";
  heap::HeapReport r = *heap::Check(ctx_);
  EXPECT_TRUE(r.errors.empty()) << r.errors[0];
}

TEST_F(HeapTest, AClientKilledBetweenAnyTwoStepsLeavesTheHeapConsistent) {
  // Some state to work against: a current slab per class in use, runs, free pages.
  std::vector<uint64_t> keep;
  for (uint64_t size : {16, 100, 3000, 9000, 70000}) keep.push_back(*heap::Allocate(ctx_, size));
  int kills = 0;
  for (uint64_t size : {16, 48, 2000, 5000, 300000}) {
    // Killed at its 1st, 2nd, ... change, until an allocation gets through whole.
    for (int steps = 1;; ++steps) {
      SCOPED_TRACE(::testing::Message() << "allocate " << size << ", killed at step " << steps);
      DyingContext dying(ctx_, steps);
      absl::StatusOr<uint64_t> a = heap::Allocate(dying, size);
      heap::HeapReport r = *heap::Check(ctx_);
      ASSERT_TRUE(r.errors.empty()) << r.errors[0];
      ASSERT_EQ(r.live_bytes() + r.free_bytes() + r.orphaned_bytes + r.slab_overhead_bytes,
                r.data_bytes);
      if (a.ok()) {
        // And the free of it, killed at every step too; then a whole free.
        for (int free_steps = 1;; ++free_steps) {
          DyingContext dying_free(ctx_, free_steps);
          absl::Status f = heap::Free(dying_free, *a);
          heap::HeapReport after = *heap::Check(ctx_);
          ASSERT_TRUE(after.errors.empty()) << after.errors[0];
          if (f.ok() || !dying_free.dead()) break;
          ++kills;
          // A free that died before its one publishing CAS left the block allocated.
          absl::Status again = heap::Free(ctx_, *a);
          if (again.ok()) break;
          ASSERT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
          break;  // it had been published: freeing again is a double free
        }
        break;
      }
      ASSERT_TRUE(dying.dead()) << a.status();
      ASSERT_LT(steps, 50);
      ++kills;
    }
  }
  // A root creator killed at any step leaves either no root or the whole root.
  for (int steps = 1;; ++steps) {
    DyingContext dying(ctx_, steps);
    absl::StatusOr<uint64_t> v = heap::GetOrCreateRoot(dying, "made-by-the-dying", 77);
    absl::StatusOr<uint64_t> seen = heap::GetRoot(ctx_, "made-by-the-dying");
    if (seen.ok()) {
      EXPECT_EQ(*seen, 77u);
      break;
    }
    ASSERT_EQ(seen.status().code(), absl::StatusCode::kNotFound);
    ASSERT_FALSE(v.ok());
    ++kills;
  }
  EXPECT_GE(kills, 10);  // the steps above were really interrupted
  // The heap still works: everything else can be freed and the memory allocated again.
  for (uint64_t a : keep) ASSERT_TRUE(heap::Free(ctx_, a).ok());
  heap::HeapReport r = *heap::Check(ctx_);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(heap::Allocate(ctx_, (r.free_bytes() - r.orphaned_bytes) / 2).ok());
}

}  // namespace
}  // namespace ardma
