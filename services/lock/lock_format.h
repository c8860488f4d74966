// The FCFS lock service's memory layout and argument encodings, shared by the active code
// (lock.cc, which runs on the server or, in RDMA mode, on the client; lock_functions.cc) and
// LockClient.
//
// A lock is a 1024-byte heap block, found by name through the DHT table "locks" (key: the lock's
// name, value: the block's address, inserted once with dht.insert so racing creators agree):
//
//   +0    magic "ARDMALK1"
//   +8    StableHash(name)                  checked on every use (a stale cached address fails)
//   +16   tail: the next ticket             FETCH_ADD 1 takes a ticket (64-bit, never wraps)
//   +24   head: no ticket below it is live  a hint, only ever raised (CAS)
//   +32   fence: fencing tokens issued      FETCH_ADD 1 before every grant
//   +40   sealed tail                       while tail has kSealed set: the tail it had then
//   +48   reserved (16 bytes)
//   +64   ring: kRingSlots 8-byte slots; ticket t uses slot t % kRingSlots
//
// A slot word describes one ticket:
//
//   bits 0-23   ticket (low 24 bits)        whose slot this is
//   bits 24-25  state                       0 never used, 1 waiting, 2 held, 3 released
//   bit  26     exclusive                   else shared
//   bit  27     active                      its owner is parked on the server (wake it there)
//   bits 28-39  change count                +1 on every grant and renewal (observers' lease clock)
//   bits 40-63  lease in milliseconds
//
// Ticket t may claim its slot once the slot's previous ticket (t - kRingSlots) is released, so at
// most kRingSlots tickets are live per lock; later arrivals wait for a slot, still in order.
// Grant rule (FCFS across both modes): an exclusive ticket is granted when every earlier ticket is
// released; a shared one when every earlier exclusive ticket is released. A ticket taken but not
// yet described in its slot counts as exclusive. Leases are judged by observers on their own
// clocks: a waiter that sees the first live ticket's slot word unchanged for longer than that
// ticket's lease (1 s if it was never described: its taker died before its CAS) releases it (CAS),
// so a dead or paused holder loses the lock to the next ticket.
//
// Sealing (a cluster moving the lock's slot to another server, docs/cluster.md): the mover writes
// the tail T at +40, then CASes tail from T to kSealed | T. Tickets below T go on as before; a
// taker whose FETCH_ADD returns a value with kSealed set holds no ticket (it never touches the
// ring) and is redirected to wherever the slot's fence says. Unsealing CASes tail back to T, so
// tickets taken while sealed leave no trace. A lock whose slot moved away stays sealed, its block
// kept, so that clients holding its address in RDMA mode keep bouncing off it.
#ifndef ARDMA_SERVICES_LOCK_LOCK_FORMAT_H_
#define ARDMA_SERVICES_LOCK_LOCK_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma::lock {

inline constexpr std::string_view kTable = "locks";
// The namespace of lock names in a cluster's slot hash (docs/cluster.md).
inline constexpr std::string_view kLockSpace = "lock";
inline constexpr uint64_t kMagic = 0x314b4c414d445241ull;  // "ARDMALK1"
inline constexpr uint64_t kNameHashOffset = 8;
inline constexpr uint64_t kTailOffset = 16;
inline constexpr uint64_t kHeadOffset = 24;
inline constexpr uint64_t kFenceOffset = 32;
inline constexpr uint64_t kSealedTailOffset = 40;
inline constexpr uint64_t kSealed = 1ull << 62;
inline constexpr uint64_t kRingOffset = 64;
inline constexpr uint64_t kRingSlots = 120;
inline constexpr uint64_t kBlockBytes = kRingOffset + 8 * kRingSlots;  // 1024
inline constexpr size_t kMaxNameBytes = 1024;

inline constexpr uint64_t kTicketMask = (1ull << 24) - 1;
enum class SlotState : uint64_t { kUnused = 0, kWaiting = 1, kHeld = 2, kReleased = 3 };

inline constexpr absl::Duration kMinLease = absl::Milliseconds(10);
inline constexpr absl::Duration kMaxLease = absl::Milliseconds((1ll << 24) - 1);  // ~4.6 hours
inline constexpr absl::Duration kDefaultLease = absl::Seconds(10);

struct Slot {
  uint64_t word = 0;

  uint64_t ticket() const { return word & kTicketMask; }
  SlotState state() const { return static_cast<SlotState>((word >> 24) & 3); }
  bool exclusive() const { return (word >> 26) & 1; }
  bool active() const { return (word >> 27) & 1; }
  uint64_t changes() const { return (word >> 28) & 0xfff; }
  absl::Duration lease() const { return absl::Milliseconds(static_cast<int64_t>(word >> 40)); }

  static Slot Make(uint64_t ticket, SlotState state, bool exclusive, bool active, uint64_t changes,
                   absl::Duration lease) {
    uint64_t ms = static_cast<uint64_t>(absl::ToInt64Milliseconds(lease)) & ((1ull << 24) - 1);
    return Slot{(ticket & kTicketMask) | static_cast<uint64_t>(state) << 24 |
                static_cast<uint64_t>(exclusive) << 26 | static_cast<uint64_t>(active) << 27 |
                (changes & 0xfff) << 28 | ms << 40};
  }
  Slot With(SlotState state) const {
    return Slot{(word & ~(3ull << 24)) | static_cast<uint64_t>(state) << 24};
  }
  Slot Changed(absl::Duration lease) const {
    return Make(ticket(), state(), exclusive(), active(), changes() + 1, lease);
  }
};

// What the slot of ring index `index` says about ticket `t` (t % kRingSlots == index).
enum class TicketView { kNotClaimed, kLive, kReleased };
TicketView ViewTicket(Slot slot, uint64_t t);

// InvalidArgument unless `name` is 1 to kMaxNameBytes bytes.
absl::Status CheckLockName(std::string_view name);
// InvalidArgument unless kMinLease <= lease <= kMaxLease.
absl::Status CheckLease(absl::Duration lease);

// The key a waiter for ticket `t` of the lock at `addr` parks under, and its close-hook key.
std::string WaiterKey(uint64_t addr, uint64_t t);

// lock.acquire results: granted:u8, then if granted addr:u64 ticket:u64 token:u64 word:u64 (the
// held slot word, which release and renew present), else kick:u8 (over RemoteContext: an active
// waiter's turn came when this try gave its ticket back; send lock.kick).
struct AcquireResult {
  bool granted = false;
  uint64_t addr = 0, ticket = 0, token = 0, word = 0;
  bool kick = false;
};
std::string EncodeAcquireResult(const AcquireResult& r);
absl::StatusOr<AcquireResult> DecodeAcquireResult(std::string_view bytes);

// lock.acquire arguments of a first call: phase 0, name, exclusive, wait (0: try only), lease,
// and the lock's address if the caller knows it (0: resolve the name).
struct AcquireArgs {
  std::string_view name;
  bool exclusive = true;
  absl::Duration wait;
  absl::Duration lease = kDefaultLease;
  uint64_t addr = 0;
};
std::string EncodeAcquireArgs(const AcquireArgs& a);

}  // namespace ardma::lock

#endif  // ARDMA_SERVICES_LOCK_LOCK_FORMAT_H_
