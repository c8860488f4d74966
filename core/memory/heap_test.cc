#include "core/memory/heap.h"

#include <set>
#include <thread>
#include <vector>

#include "core/active/local_context.h"
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
  EXPECT_EQ(heap::GetRoot(ctx_, std::string(48, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(HeapTest, RootLeftHalfCreatedByADeadCreatorFailsInsteadOfSpinning) {
  ASSERT_TRUE(heap::GetOrCreateRoot(ctx_, "orphan", 5).ok());
  // Put its slot back into the "claiming" phase, as a creator that died mid-way leaves it.
  uint64_t state_addr = *heap::RootValueAddress(ctx_, "orphan") - 8;
  uint64_t state = *ctx_.ReadU64(state_addr);
  ASSERT_TRUE(ctx_.WriteU64(state_addr, (state & ~0xffffull) | 1).ok());
  absl::Time start = absl::Now();
  EXPECT_EQ(heap::GetRoot(ctx_, "orphan").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(heap::GetOrCreateRoot(ctx_, "orphan", 6).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(heap::GetOrCreateRoot(ctx_, "other", 1).ok());  // the rest of the table works
}

TEST_F(HeapTest, RootTableFillsUp) {
  for (int i = 0; i < heap::kNumRoots; ++i) {
    ASSERT_TRUE(heap::GetOrCreateRoot(ctx_, "root" + std::to_string(i), i).ok()) << i;
  }
  for (int i = 0; i < heap::kNumRoots; ++i) {
    EXPECT_EQ(*heap::GetRoot(ctx_, "root" + std::to_string(i)), static_cast<uint64_t>(i));
  }
  EXPECT_EQ(heap::GetOrCreateRoot(ctx_, "one-too-many", 1).status().code(),
            absl::StatusCode::kResourceExhausted);
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

}  // namespace
}  // namespace ardma
