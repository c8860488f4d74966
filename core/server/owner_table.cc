#include "core/server/owner_table.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/context/lock_owner.h"
#include "core/log.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

constexpr std::string_view kRoot = "ardma.owners";

// Whether the table at `table` fits the heap and says what it is.
bool Valid(Context& ctx, uint64_t table, uint64_t heap_bytes, uint64_t* slots) {
  absl::StatusOr<std::string> head = ctx.Read(table, owner::kHeaderBytes);
  if (!head.ok()) return false;
  uint64_t words[3];
  std::memcpy(words, head->data(), sizeof words);
  if (words[0] != owner::kTableMagic || words[1] < 2 || words[1] > owner::kMaxSlots) return false;
  if (table % 8 != 0 || owner::SlotAddress(table, words[1]) > heap_bytes) return false;
  *slots = words[1];
  return true;
}

absl::StatusOr<uint64_t> Create(Context& ctx, uint64_t slots) {
  uint64_t bytes = owner::kHeaderBytes + slots * 8;
  ARDMA_ASSIGN_OR_RETURN(uint64_t table, heap::Allocate(ctx, bytes));
  std::string init(bytes, '\0');
  uint64_t head[3] = {owner::kTableMagic, slots, 1};
  std::memcpy(init.data(), head, sizeof head);
  ARDMA_RETURN_IF_ERROR(ctx.Write(table, init));
  return table;
}

}  // namespace

uint64_t OwnerTable::SlotsFor(uint64_t heap_bytes) {
  return std::clamp<uint64_t>(heap_bytes >> 10, 1024, 65536);
}

absl::StatusOr<std::unique_ptr<OwnerTable>> OwnerTable::Open(Context& ctx, Region& heap,
                                                             uint64_t slots) {
  slots = std::clamp<uint64_t>(slots, 2, owner::kMaxSlots);
  uint64_t table = 0, found_slots = 0;
  absl::StatusOr<uint64_t> root = heap::GetRoot(ctx, kRoot);
  if (root.ok() && Valid(ctx, *root, heap.size(), &found_slots)) {
    table = *root;
    slots = found_slots;
  } else {
    if (root.ok()) {
      ARDMA_LOG(kWarning, "the owner table at %u does not check out: starting a new one", *root);
    } else if (!absl::IsNotFound(root.status())) {
      return root.status();
    }
    ARDMA_ASSIGN_OR_RETURN(table, Create(ctx, slots));
    // The server is the only one who starts a table, once, before it serves: no race to lose.
    if (root.ok()) {
      ARDMA_RETURN_IF_ERROR(heap::CompareAndSetRoot(ctx, kRoot, *root, table).status());
    } else {
      ARDMA_RETURN_IF_ERROR(heap::GetOrCreateRoot(ctx, kRoot, table).status());
    }
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t next, ctx.ReadU64(table + owner::kNextOffset));
  std::unique_ptr<OwnerTable> t(new OwnerTable(heap, table, slots, next));
  {
    absl::MutexLock lock(&t->mu_);
    for (uint64_t s = 1; s < slots; ++s) {
      // A live slot's connection died with the last run: its next generation, ended.
      uint64_t word = t->Word(s).load();
      t->generation_[s] = (word >> 1) + (word & 1);
      t->Word(s).store(t->generation_[s] << 1);
    }
  }
  t->server_token_ = t->Join().token;
  return t;
}

OwnerTable::OwnerTable(Region& heap, uint64_t table, uint64_t slots, uint64_t next)
    : heap_(heap), table_(table), slots_(slots), generation_(slots), live_slot_(slots) {
  if (next == 0 || next >= slots) next = 1;
  absl::MutexLock lock(&mu_);
  for (uint64_t i = 0; i < slots - 1; ++i) free_.push_back(1 + (next - 1 + i) % (slots - 1));
}

std::atomic_ref<uint64_t> OwnerTable::Word(uint64_t slot) {
  return std::atomic_ref<uint64_t>(
      *reinterpret_cast<uint64_t*>(heap_.data() + owner::SlotAddress(table_, slot)));
}

// The words in the heap are written, never trusted: what the server knows of each slot is here, so
// a client that writes over the table cannot make the server lose a slot.
LockOwner OwnerTable::Join() {
  absl::MutexLock lock(&mu_);
  if (free_.empty()) return {0, table_};
  uint64_t slot = free_.front();
  free_.pop_front();
  std::atomic_ref<uint64_t>(
      *reinterpret_cast<uint64_t*>(heap_.data() + table_ + owner::kNextOffset))
      .store(slot + 1 < slots_ ? slot + 1 : 1, std::memory_order_relaxed);
  live_slot_[slot] = true;
  Word(slot).store(generation_[slot] << 1 | 1);
  live_.fetch_add(1, std::memory_order_relaxed);
  return {owner::MakeToken(slot, generation_[slot]), table_};
}

void OwnerTable::Leave(uint64_t token) {
  uint64_t slot = owner::TokenSlot(token);
  absl::MutexLock lock(&mu_);
  if (slot == 0 || slot >= slots_ || !live_slot_[slot] ||
      owner::MakeToken(slot, generation_[slot]) != token) {
    return;  // not (or no longer) this owner's
  }
  live_slot_[slot] = false;
  Word(slot).store(++generation_[slot] << 1);  // ended: the next generation, not live
  live_.fetch_sub(1, std::memory_order_relaxed);
  free_.push_back(slot);
}

}  // namespace ardma
