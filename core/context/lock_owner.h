// The owner table's layout and owner tokens (see LockOwner in context.h).
//
//   table := magic:u64 slots:u64 next:u64 word[slots]  ; a heap block, root "ardma.owners"
//   next  := the slot after the one handed out last (a restart goes on from there, so the slots
//            of the holders that died with the last run are the last to be reused)
//   word  := 2 * generation + live               ; bumped when its connection opens and closes
//   token := slot << 44 | generation(20 bits) << 24 | any(23 bits) << 1 | 1
//
// Slot 0 is never used, so a token whose slot is 0 is anonymous. A word that holds a token (a lock
// word) can be checked against the table: its holder is alive while the slot's word is still
// 2 * generation + 1. Words too narrow for a token (a hash-table bucket's control word) keep only
// the slot; see services/lock_word.h for how a waiter decides then.
#ifndef ARDMA_CORE_CONTEXT_LOCK_OWNER_H_
#define ARDMA_CORE_CONTEXT_LOCK_OWNER_H_

#include <cstdint>

namespace ardma::owner {

inline constexpr uint64_t kTableMagic = 0x31574f414d445241ull;  // "ARDMAOW1"
inline constexpr uint64_t kHeaderBytes = 24;
inline constexpr uint64_t kNextOffset = 16;
inline constexpr int kSlotBits = 20;
inline constexpr uint64_t kMaxSlots = 1ull << kSlotBits;  // slot numbers are below this
inline constexpr uint64_t kGenMask = (1ull << 20) - 1;
inline constexpr uint64_t kNonceMask = ((1ull << 23) - 1) << 1;  // the bits a token leaves free

inline constexpr uint64_t MakeToken(uint64_t slot, uint64_t generation) {
  return slot << 44 | (generation & kGenMask) << 24 | 1;
}
inline constexpr uint64_t TokenSlot(uint64_t token) { return token >> 44; }
inline constexpr uint64_t TokenGeneration(uint64_t token) { return (token >> 24) & kGenMask; }
inline constexpr uint64_t SlotAddress(uint64_t table, uint64_t slot) {
  return table + kHeaderBytes + slot * 8;
}
// Whether a slot whose word is `word` still belongs to the owner of `token`.
inline constexpr bool HoldsToken(uint64_t word, uint64_t token) {
  return (word & 1) != 0 && ((word >> 1) & kGenMask) == TokenGeneration(token);
}

}  // namespace ardma::owner

#endif  // ARDMA_CORE_CONTEXT_LOCK_OWNER_H_
