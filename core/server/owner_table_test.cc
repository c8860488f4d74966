#include "core/server/owner_table.h"

#include <set>

#include "core/active/local_context.h"
#include "core/context/lock_owner.h"
#include "core/memory/heap.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

class OwnerTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_.Add(*Region::Create({.size = 1 << 20}));
    ASSERT_TRUE(heap::FormatIfNeeded(ctx_, 1 << 20, false).ok());
  }
  Region& heap() { return **regions_.Get(kHeapRegion); }
  uint64_t WordOf(const LockOwner& o) {
    return *ctx_.ReadU64(owner::SlotAddress(o.table, owner::TokenSlot(o.token)));
  }

  RegionTable regions_;
  Execution ex_{.regions = &regions_};
  LocalContext ctx_{&ex_};
};

TEST_F(OwnerTableTest, ConnectionsGetLiveSlotsThatEndWhenTheyLeave) {
  auto owners = OwnerTable::Open(ctx_, heap(), 8);
  ASSERT_TRUE(owners.ok()) << owners.status();
  LockOwner server = (*owners)->server();
  EXPECT_NE(server.token, 0u);
  EXPECT_TRUE(owner::HoldsToken(WordOf(server), server.token));
  LockOwner a = (*owners)->Join(), b = (*owners)->Join();
  EXPECT_NE(owner::TokenSlot(a.token), owner::TokenSlot(b.token));
  EXPECT_EQ(a.table, server.table);
  EXPECT_EQ((*owners)->live(), 3u);
  (*owners)->Leave(a.token);
  EXPECT_FALSE(owner::HoldsToken(WordOf(a), a.token));
  EXPECT_EQ(WordOf(a) & 1, 0u);
  EXPECT_TRUE(owner::HoldsToken(WordOf(b), b.token));
  (*owners)->Leave(a.token);  // twice: nothing more
  EXPECT_EQ((*owners)->live(), 2u);
}

TEST_F(OwnerTableTest, FreedSlotsComeBackLastAndATakenTableGivesAnonymousOwners) {
  auto owners = OwnerTable::Open(ctx_, heap(), 4);  // slots 1-3; the server takes 1
  ASSERT_TRUE(owners.ok());
  LockOwner a = (*owners)->Join(), b = (*owners)->Join();
  EXPECT_EQ((*owners)->Join().token, 0u);  // full: anonymous
  (*owners)->Leave(a.token);
  LockOwner c = (*owners)->Join();
  EXPECT_EQ(owner::TokenSlot(c.token), owner::TokenSlot(a.token));
  EXPECT_NE(c.token, a.token);  // the next generation
  EXPECT_FALSE(owner::HoldsToken(WordOf(c), a.token));
  std::set<uint64_t> slots;
  for (int i = 0; i < 2; ++i) (*owners)->Leave(i == 0 ? b.token : c.token);
  for (int i = 0; i < 2; ++i) slots.insert(owner::TokenSlot((*owners)->Join().token));
  EXPECT_EQ(slots.size(), 2u);
}

TEST_F(OwnerTableTest, ARestartEndsEveryOwnerOfTheLastRun) {
  LockOwner a, server;
  {
    auto owners = OwnerTable::Open(ctx_, heap(), 16);
    ASSERT_TRUE(owners.ok());
    server = (*owners)->server();
    a = (*owners)->Join();
  }  // the process "dies" without anyone leaving
  auto again = OwnerTable::Open(ctx_, heap(), 64);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->slots(), 16u);  // the table found, not a new one
  EXPECT_EQ((*again)->server().table, server.table);
  EXPECT_FALSE(owner::HoldsToken(WordOf(a), a.token));
  EXPECT_FALSE(owner::HoldsToken(WordOf(server), server.token));
  EXPECT_NE((*again)->server().token, server.token);
  EXPECT_TRUE(owner::HoldsToken(WordOf((*again)->server()), (*again)->server().token));
  // Slots go on from where the last run stopped: the dead holders' slots come back last.
  EXPECT_EQ(owner::TokenSlot((*again)->server().token), owner::TokenSlot(a.token) + 1);
}

TEST_F(OwnerTableTest, AClientWritingOverTheTableCannotMakeTheServerLoseASlot) {
  auto owners = OwnerTable::Open(ctx_, heap(), 3);  // one slot besides the server's
  ASSERT_TRUE(owners.ok());
  LockOwner a = (*owners)->Join();
  uint64_t at = owner::SlotAddress(a.table, owner::TokenSlot(a.token));
  ASSERT_TRUE(ctx_.WriteU64(at, 12345).ok());
  (*owners)->Leave(a.token);
  EXPECT_EQ((*owners)->live(), 1u);
  EXPECT_FALSE(owner::HoldsToken(WordOf(a), a.token));
  LockOwner b = (*owners)->Join();  // the slot came back
  EXPECT_EQ(owner::TokenSlot(b.token), owner::TokenSlot(a.token));
  EXPECT_TRUE(owner::HoldsToken(WordOf(b), b.token));
  (*owners)->Leave(a.token);  // a stale token ends nothing
  EXPECT_TRUE(owner::HoldsToken(WordOf(b), b.token));
}

TEST_F(OwnerTableTest, ADamagedTableIsReplaced) {
  uint64_t table;
  {
    auto owners = OwnerTable::Open(ctx_, heap(), 16);
    ASSERT_TRUE(owners.ok());
    table = (*owners)->server().table;
  }
  ASSERT_TRUE(ctx_.WriteU64(table, 0).ok());  // a client wrote over its magic
  auto again = OwnerTable::Open(ctx_, heap(), 16);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE((*again)->server().table, table);
  EXPECT_EQ(*heap::GetRoot(ctx_, "ardma.owners"), (*again)->server().table);
}

TEST(OwnerTableSizeTest, OneSlotPerKibibyteWithinBounds) {
  EXPECT_EQ(OwnerTable::SlotsFor(1 << 20), 1024u);
  EXPECT_EQ(OwnerTable::SlotsFor(32u << 20), 32768u);
  EXPECT_EQ(OwnerTable::SlotsFor(1ull << 34), 65536u);
  EXPECT_EQ(OwnerTable::SlotsFor(4096), 1024u);
}

}  // namespace
}  // namespace ardma
