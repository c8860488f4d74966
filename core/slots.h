// Slots as every layer sees them (docs/cluster.md): the slot of a key, and the slot fence — a
// cluster member's per-slot state, kept in its own memory, that service code checks wherever it
// runs (on the server in active mode, on the client in RDMA mode), so that a key is only ever
// served by its slot's owner while slots move between servers.
//
// The fence: heap root "ardma.slots" names kSlots entries of 16 bytes, entry s for slot s:
//   word 0  epoch << 2 | state   state 0 not owned, 1 owned, 2 frozen (moving away: reads are
//                                served, writes wait), 3 moved (word 1 names the new owner)
//   word 1  the new owner's member id (state 3); kReplicatedMark on an owned slot whose writes
//           are replicated (issue 35: only active-mode writes reach the replicas); else 0
// A server without the root is not a cluster member: it serves every key, and nothing is checked.
// Readers check the word after reading the data (a value read before the word showed "owned" or
// "frozen" was the current one); writers check it after taking the key's lock (a slot is frozen
// before it is copied, and the copier takes every lock once after freezing).
#ifndef ARDMA_CORE_SLOTS_H_
#define ARDMA_CORE_SLOTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ardma::slots {

inline constexpr uint32_t kSlots = 16384;

// CRC-16/XMODEM of `bytes` (polynomial 0x1021, initial value `crc`), as Redis Cluster hashes keys.
uint16_t Crc16(std::string_view bytes, uint16_t crc = 0);

// The slot of a key within a namespace (a DHT table, or the lock or list service): the CRC-16 of
// the namespace, a NUL and the key, modulo kSlots. If the key holds a "{tag}" with a non-empty tag,
// only the tag is hashed, so keys that share a tag share a slot (as Redis's hash tags).
uint32_t SlotOf(std::string_view space, std::string_view key);

// ---- The fence ----

inline constexpr std::string_view kFenceRoot = "ardma.slots";
inline constexpr uint64_t kFenceEntryBytes = 16;
inline constexpr uint64_t kFenceBytes = kSlots * kFenceEntryBytes;

enum class SlotState : uint64_t { kNotOwned = 0, kOwned = 1, kFrozen = 2, kMoved = 3 };

inline uint64_t FenceWord(SlotState state, uint64_t epoch) {
  return epoch << 2 | static_cast<uint64_t>(state);
}
inline SlotState StateOf(uint64_t word) { return static_cast<SlotState>(word & 3); }
// Word 1 of an owned slot that has replicas (never a member id: those are random, and this one is
// reserved).
inline constexpr uint64_t kReplicatedMark = ~uint64_t{0};
inline bool Replicated(uint64_t word, uint64_t owner_word) {
  return StateOf(word) == SlotState::kOwned && owner_word == kReplicatedMark;
}
inline uint64_t EpochOf(uint64_t word) { return word >> 2; }
// The address of slot `slot`'s entry in the fence at `fence`.
inline uint64_t FenceEntry(uint64_t fence, uint32_t slot) {
  return fence + uint64_t{slot} * kFenceEntryBytes;
}

// Where a call about a key must go instead of this server.
struct Redirect {
  bool frozen = false;  // the slot is moving away: come back shortly
  uint32_t slot = 0;
  uint64_t epoch = 0;  // the map epoch of the change
  uint64_t owner = 0;  // moved: the new owner's member id (0: ask the map)
};

// What service code does after reading its key's fence word: OK to go on, or a status carrying
// the Redirect (RedirectOf) that the service answers its client with. Reads go on while a slot is
// frozen; writes do not.
absl::Status CheckFence(uint32_t slot, uint64_t word, uint64_t owner_word, bool write);
absl::Status RedirectStatus(const Redirect& redirect);
std::optional<Redirect> RedirectOf(const absl::Status& status);

// A Redirect on the wire, as services answer it: frozen:u8 slot:u32 epoch:u64 owner:u64.
inline constexpr size_t kRedirectBytes = 21;
std::string RedirectBytes(const Redirect& redirect);
// nullopt unless `bytes` is kRedirectBytes long.
std::optional<Redirect> RedirectFromBytes(std::string_view bytes);

}  // namespace ardma::slots

#endif  // ARDMA_CORE_SLOTS_H_
