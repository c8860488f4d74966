// Interleavings the concurrent suite (list_test.cc) reaches only by luck, made to happen every
// time: a context that runs another party's steps just before one chosen CAS.
#include <functional>
#include <string>
#include <utility>

#include "core/active/local_context.h"
#include "core/memory/heap.h"
#include "gtest/gtest.h"
#include "services/list/list.h"

namespace ardma::list {
namespace {

constexpr uint64_t kSize = 4 << 20;
constexpr uint64_t kAddrMask = ((1ull << 48) - 1) & ~15ull;

// Before its first CAS on `addr`, runs `meanwhile` (once).
class InterleavingContext : public LocalContext {
 public:
  using LocalContext::LocalContext;

  void BeforeCasOn(uint64_t addr, std::function<void()> meanwhile) {
    addr_ = addr;
    meanwhile_ = std::move(meanwhile);
  }

 protected:
  absl::StatusOr<CasResult> DoCompareAndSwap(RegionId region, uint64_t addr, uint64_t expected,
                                             uint64_t desired) override {
    if (meanwhile_ && addr == addr_) std::exchange(meanwhile_, nullptr)();
    return LocalContext::DoCompareAndSwap(region, addr, expected, desired);
  }

 private:
  uint64_t addr_ = 0;
  std::function<void()> meanwhile_;
};

class ListRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_.Add(*Region::Create({.size = kSize}));
    ASSERT_TRUE(*heap::FormatIfNeeded(other_, kSize));
    header_ = *OpenByName(other_, "c", /*create=*/true);
  }

  uint64_t HeadNode() { return *other_.ReadU64(header_ + 8) & kAddrMask; }

  // Another client removes the list's only node and the heap hands its block to someone else,
  // who zeroes it (any user of the heap may).
  uint64_t RemoveHeadAndReuseIt() {
    uint64_t node = HeadNode();
    EXPECT_TRUE(Remove(other_, header_, 0).ok());
    absl::StatusOr<uint64_t> reused = heap::Allocate(other_, 64);
    EXPECT_TRUE(reused.ok() && *reused == node) << "the heap did not hand the block out again";
    EXPECT_TRUE(other_.Write(node, std::string(64, '\0')).ok());
    return node;
  }

  std::vector<ListValue> Elements() {
    std::vector<ListValue> out;
    for (uint64_t i = 0;; ++i) {
      absl::StatusOr<ListValue> v = Get(other_, header_, i);
      if (!v.ok()) {
        EXPECT_TRUE(absl::IsOutOfRange(v.status())) << v.status();
        return out;
      }
      out.push_back(*v);
    }
  }

  RegionTable regions_;
  Execution ex_{.regions = &regions_};
  Execution other_ex_{.regions = &regions_};
  InterleavingContext ctx_{&ex_};
  LocalContext other_{&other_ex_};
  uint64_t header_ = 0;
};

TEST_F(ListRaceTest, AppendBehindATailFreedAndReusedLinksIntoTheList) {
  ASSERT_TRUE(Append(other_, header_, int64_t{1}).ok());
  uint64_t reused = 0;
  ctx_.BeforeCasOn(HeadNode(), [&] { reused = RemoveHeadAndReuseIt(); });
  ASSERT_TRUE(Append(ctx_, header_, int64_t{2}).ok());
  ASSERT_NE(reused, 0u) << "the interleaving did not happen";
  EXPECT_EQ(*other_.ReadU64(reused), 0u) << "the append wrote into a block it no longer owned";
  EXPECT_EQ(Elements(), std::vector<ListValue>{int64_t{2}});
  EXPECT_EQ(*Size(other_, header_), 1u);
}

TEST_F(ListRaceTest, RemoveOfATailFreedAndReusedRemovesNothing) {
  ASSERT_TRUE(Append(other_, header_, int64_t{1}).ok());
  uint64_t reused = 0;
  ctx_.BeforeCasOn(HeadNode(), [&] { reused = RemoveHeadAndReuseIt(); });
  absl::StatusOr<ListValue> removed = Remove(ctx_, header_, 0);
  ASSERT_NE(reused, 0u) << "the interleaving did not happen";
  EXPECT_TRUE(absl::IsOutOfRange(removed.status())) << "removed twice: " << removed.status();
  EXPECT_EQ(*other_.ReadU64(reused), 0u) << "the remove marked a block it no longer owned";
  EXPECT_EQ(*Size(other_, header_), 0u);
}

TEST_F(ListRaceTest, PrependWhileTheHeadIsRemovedLinksNoFreedNode) {
  ASSERT_TRUE(Append(other_, header_, int64_t{1}).ok());
  bool removed = false;
  ctx_.BeforeCasOn(header_ + 8, [&] { removed = Remove(other_, header_, 0).ok(); });
  ASSERT_TRUE(Prepend(ctx_, header_, int64_t{2}).ok());
  ASSERT_TRUE(removed) << "the interleaving did not happen";
  EXPECT_EQ(Elements(), std::vector<ListValue>{int64_t{2}});
  EXPECT_EQ(*Size(other_, header_), 1u);
}

// A memory file from before ends carried an incarnation: magic ARDMALS1, the tail's next word 0.
TEST_F(ListRaceTest, AListOfTheFirstFormatStillTakesAppends) {
  ASSERT_TRUE(Append(other_, header_, int64_t{1}).ok());
  ASSERT_TRUE(other_.WriteU64(header_, kHeaderMagicV1).ok());
  ASSERT_TRUE(other_.WriteU64(HeadNode(), 0).ok());
  ASSERT_TRUE(Append(other_, header_, int64_t{2}).ok());
  ASSERT_TRUE(Prepend(other_, header_, int64_t{0}).ok());
  EXPECT_EQ(Elements(), (std::vector<ListValue>{int64_t{0}, int64_t{1}, int64_t{2}}));
  EXPECT_EQ(*Remove(other_, header_, 2), ListValue(int64_t{2}));
  ASSERT_TRUE(Append(other_, header_, int64_t{3}).ok());
  EXPECT_EQ(Elements(), (std::vector<ListValue>{int64_t{0}, int64_t{1}, int64_t{3}}));
}

}  // namespace
}  // namespace ardma::list
