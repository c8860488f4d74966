#include "services/lock_word.h"

#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "core/context/lock_owner.h"
#include "core/status_macros.h"
#include "services/random64.h"

namespace ardma {
namespace {

// The owner table's header and slot `slot`'s word, in one batch. Nullopt when the slot is past the
// table (a value from an older table: its owner is long gone).
absl::StatusOr<std::optional<uint64_t>> SlotWord(Context& ctx, uint64_t table, uint64_t slot) {
  uint64_t head[2], word;  // magic, slots
  ReadOp ops[2] = {
      {table, std::span<char>(reinterpret_cast<char*>(head), sizeof head)},
      {owner::SlotAddress(table, slot), std::span<char>(reinterpret_cast<char*>(&word), 8)}};
  if (slot >= owner::kMaxSlots) return std::nullopt;
  absl::Status read = ctx.ReadBatch(ops);
  if (absl::IsOutOfRange(read)) return std::nullopt;  // past the heap, so past the table
  ARDMA_RETURN_IF_ERROR(read);
  if (head[0] != owner::kTableMagic) return absl::DataLossError("the owner table is damaged");
  if (slot >= head[1]) return std::nullopt;
  return word;
}

}  // namespace

uint64_t NewHolderValue(Context& ctx) {
  return ctx.lock_owner().token | (Random64() & owner::kNonceMask) | 1;
}

absl::StatusOr<bool> HolderEnded(Context& ctx, uint64_t value) {
  uint64_t table = ctx.lock_owner().table, slot = owner::TokenSlot(value);
  if (table == 0 || slot == 0) return false;
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> word, SlotWord(ctx, table, slot));
  return !word || !owner::HoldsToken(*word, value);
}

absl::StatusOr<bool> SlotVacant(Context& ctx, uint64_t slot) {
  uint64_t table = ctx.lock_owner().table;
  if (table == 0 || slot == 0) return false;
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> word, SlotWord(ctx, table, slot));
  return !word || (*word & 1) == 0;
}

absl::StatusOr<uint64_t> AcquireLockWord(Context& ctx, uint64_t addr, std::string_view what) {
  uint64_t mine = NewHolderValue(ctx);
  for (int round = 0; round < (1 << 30); ++round) {
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(addr, 0, mine));
    if (cas.swapped) return mine;
    if (TimeToCheckHolder(round)) {
      ARDMA_ASSIGN_OR_RETURN(bool ended, HolderEnded(ctx, cas.observed));
      if (ended) {
        ARDMA_ASSIGN_OR_RETURN(CasResult steal, ctx.CompareAndSwap(addr, cas.observed, mine));
        if (steal.swapped) return mine;
      }
    }
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
  }
  return absl::AbortedError(absl::StrCat(ToAbsl(what), ": lock stayed taken"));
}

absl::Status ReleaseLockWord(Context& ctx, uint64_t addr, uint64_t held, std::string_view what) {
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(addr, held, 0));
  if (!cas.swapped) {
    return absl::AbortedError(absl::StrCat(ToAbsl(what), ": a lock was taken over while held"));
  }
  return absl::OkStatus();
}

}  // namespace ardma
