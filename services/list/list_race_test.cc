// Interleavings the concurrent suite (list_test.cc) reaches only by luck, made to happen every
// time: a context that runs another party's steps just before one chosen CAS.
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/active/local_context.h"
#include "core/memory/heap.h"
#include "gtest/gtest.h"
#include "core/slots.h"
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
    header_ = *OpenByName(other_, "c", Use::kCreate);
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

  std::vector<ListValue> Elements() { return Elements(header_); }
  std::vector<ListValue> Elements(uint64_t header) {
    std::vector<ListValue> out;
    for (uint64_t i = 0;; ++i) {
      absl::StatusOr<ListValue> v = Get(other_, header, i);
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

// ---- Sealing for a move (docs/cluster.md) ----

std::optional<uint32_t> RedirectSlot(const absl::Status& status) {
  std::optional<slots::Redirect> r = slots::RedirectOf(status);
  if (!r) return std::nullopt;
  return r->slot;
}

TEST_F(ListRaceTest, ASealedListTakesNoChangeButIsReadAndUnsealsWhole) {
  for (int64_t v : {1, 2, 3}) ASSERT_TRUE(Append(other_, header_, v).ok());
  ASSERT_TRUE(Seal(other_, header_, 7).ok());
  absl::StatusOr<std::vector<ListValue>> sealed = Values(other_, header_);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(*sealed, (std::vector<ListValue>{int64_t{1}, int64_t{2}, int64_t{3}}));
  EXPECT_EQ(RedirectSlot(Append(other_, header_, int64_t{4})), 7u);
  EXPECT_EQ(RedirectSlot(Prepend(other_, header_, int64_t{0})), 7u);
  EXPECT_EQ(RedirectSlot(Remove(other_, header_, 1).status()), 7u);
  EXPECT_EQ(Elements(), (std::vector<ListValue>{int64_t{1}, int64_t{2}, int64_t{3}}));
  EXPECT_EQ(*Size(other_, header_), 3u);
  ASSERT_TRUE(Unseal(other_, header_).ok());
  ASSERT_TRUE(Append(other_, header_, int64_t{4}).ok());
  EXPECT_EQ(*Remove(other_, header_, 0), ListValue(int64_t{1}));
  EXPECT_EQ(Elements(), (std::vector<ListValue>{int64_t{2}, int64_t{3}, int64_t{4}}));
}

// A change that linearized before its word was sealed is in what the seal returns; one whose CAS
// comes after is refused with the redirect. Either way the sealed list stays readable (a removed
// node that can no longer be unlinked is passed over) and unseals into a working list.
TEST_F(ListRaceTest, ChangesRacingTheSealAreInItOrRefused) {
  struct Case {
    const char* what;
    int cas_on;  // the node whose word the change CASes: 0 first, 1 second, 2 third
    std::function<absl::Status(Context&, uint64_t)> change;
    bool refused;
    std::vector<int64_t> sealed;
  };
  const std::vector<Case> cases = {
      {"a remove whose unlink comes after the seal", 0,
       [](Context& c, uint64_t h) { return Remove(c, h, 1).status(); }, false, {1, 3}},
      {"a remove whose mark comes after the seal", 1,
       [](Context& c, uint64_t h) { return Remove(c, h, 1).status(); }, true, {1, 2, 3}},
      {"an append whose link comes after the seal", 2,
       [](Context& c, uint64_t h) { return Append(c, h, int64_t{4}); }, true, {1, 2, 3}},
  };
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    SCOPED_TRACE(c.what);
    uint64_t header = *OpenByName(other_, absl::StrCat("case", n), Use::kCreate);
    for (int64_t v : {1, 2, 3}) ASSERT_TRUE(Append(other_, header, v).ok());
    uint64_t node = *other_.ReadU64(header + 8) & kAddrMask;
    for (int i = 0; i < c.cas_on; ++i) node = *other_.ReadU64(node) & kAddrMask;
    std::vector<ListValue> sealed;
    ctx_.BeforeCasOn(node, [&] {
      ASSERT_TRUE(Seal(other_, header, 7).ok());
      sealed = *Values(other_, header);
    });
    absl::Status changed = c.change(ctx_, header);
    if (c.refused) {
      EXPECT_EQ(RedirectSlot(changed), 7u) << changed;
    } else {
      EXPECT_TRUE(changed.ok()) << changed;
    }
    std::vector<ListValue> expected(c.sealed.begin(), c.sealed.end());
    EXPECT_EQ(sealed, expected);
    EXPECT_EQ(Elements(header), expected);
    ASSERT_TRUE(Unseal(other_, header).ok());
    ASSERT_TRUE(Append(other_, header, int64_t{9}).ok());
    std::vector<ListValue> after = expected;
    after.push_back(int64_t{9});
    EXPECT_EQ(Elements(header), after);
  }
}

// A seal cut short (its first words sealed, the rest not): a remove of a node whose own word is
// not sealed yet goes on, but never unlinks it through a sealed word, whose value would be lost
// (it failed a reshard test: the remove read the head already sealed, then replaced it).
TEST_F(ListRaceTest, ARemoveNeverUnlinksThroughASealedWord) {
  for (int64_t v : {1, 2, 3}) ASSERT_TRUE(Append(other_, header_, v).ok());
  uint64_t head = *other_.ReadU64(header_ + 8);
  ASSERT_TRUE(other_.CompareAndSwap(header_ + 8, head, head | 2)->swapped);
  EXPECT_EQ(*Remove(other_, header_, 0), ListValue(int64_t{1}));
  EXPECT_EQ(*other_.ReadU64(header_ + 8), head | 2) << "a sealed word changed";
  ASSERT_TRUE(Seal(other_, header_, 7).ok());
  EXPECT_EQ(*Values(other_, header_), (std::vector<ListValue>{int64_t{2}, int64_t{3}}));
  EXPECT_EQ(Elements(), (std::vector<ListValue>{int64_t{2}, int64_t{3}}));
}

// The receiver's side: the values adopted, not served until the map names it; adopted again onto
// the list of that name left here.
TEST_F(ListRaceTest, AnAdoptedListIsServedOnlyOnceItIsToldTo) {
  std::vector<ListValue> values{int64_t{5}, std::string("six"), std::string(300, 's')};
  absl::StatusOr<uint64_t> adopted = Adopt(other_, "moved", 9, values);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(RedirectSlot(Get(other_, *adopted, 0).status()), 9u);
  EXPECT_EQ(RedirectSlot(Append(other_, *adopted, int64_t{8})), 9u);
  ASSERT_TRUE(SetServed(other_, *adopted, true).ok());
  EXPECT_EQ(Elements(*adopted), values);
  EXPECT_EQ(*Size(other_, *adopted), 3u);
  ASSERT_TRUE(Append(other_, *adopted, int64_t{8}).ok());
  // It moves away (sealed, not served) and comes back with other values.
  ASSERT_TRUE(Seal(other_, *adopted, 9).ok());
  ASSERT_TRUE(SetServed(other_, *adopted, false).ok());
  absl::StatusOr<uint64_t> again = Adopt(other_, "moved", 9, {int64_t{1}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *adopted);
  ASSERT_TRUE(SetServed(other_, *again, true).ok());
  EXPECT_EQ(Elements(*again), std::vector<ListValue>{int64_t{1}});
  ASSERT_TRUE(Prepend(other_, *again, int64_t{0}).ok());
  EXPECT_EQ(Elements(*again), (std::vector<ListValue>{int64_t{0}, int64_t{1}}));
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
