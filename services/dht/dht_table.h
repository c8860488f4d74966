// The hash table's words in memory (layout: dht_format.h) and the steps on them that the
// operations (dht.cc) and the resize (dht_resize.cc) share: reading the header and a key's
// neighbourhood, creating a table, bucket locks, transfers larger than one wire frame. Internal to
// the dht library; every function is written against Context and safe to call concurrently.
#ifndef ARDMA_SERVICES_DHT_DHT_TABLE_H_
#define ARDMA_SERVICES_DHT_DHT_TABLE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/context/context.h"
#include "services/dht/dht_format.h"

namespace ardma::dht {

inline constexpr uint64_t kHeaderMagic = 0x314844414d445241ull;  // "ARDMADH1"
inline constexpr uint64_t kHeaderBytes = 40;
inline constexpr uint64_t kGeometryOffset = 16;
inline constexpr uint64_t kCountOffset = 24;
inline constexpr uint64_t kClaimOffset = 32;
inline constexpr int kInitialLog2Buckets = 4;
inline constexpr uint64_t kBucketBytes = 64;
inline constexpr int kSlotsPerBucket = 7;
inline constexpr int kNeighbourhoodSlots = 2 * kSlotsPerBucket;
inline constexpr uint64_t kEntryHeaderBytes = 24;
// An entry's word 1: the key's hash in the bits a bucket index takes (an array of at most 2^40
// buckets: 64 TiB), and a nonce of the write above them, so no two writes make the same bytes.
inline constexpr int kMaxLog2Buckets = 40;
inline constexpr uint64_t kEntryHashMask = (1ull << kMaxLog2Buckets) - 1;
// An entry's word 2 (key and value lengths) once it is retired: no entry is that long, so every
// reader takes the entry for one freed under it.
inline constexpr uint64_t kRetiredLengths = ~0ull;
inline constexpr uint64_t kFirstEntryRead = 16u << 10;  // larger entries take one more READ
inline constexpr uint64_t kKeyHashSeed = 0x61726d6164687431ull;
inline constexpr uint64_t kAddrMask = ((1ull << 48) - 1) & ~15ull;
inline constexpr uint64_t kStateMask = 3, kUnlocked = 0, kLocked = 1, kMoved = 2;
inline constexpr uint64_t kSeqMask = (1ull << 20) - 1;
inline constexpr int kMaxAttempts = 100000;
inline constexpr size_t kOpsPerBatch = 4096;
inline constexpr uint64_t kBytesPerTransfer = 8u << 20;

// ---- Geometry, buckets and slots ----

struct Geometry {
  uint64_t word = 0;
  uint64_t array() const { return word & kAddrMask; }
  int log2() const { return static_cast<int>((word >> 48) & 63); }
  uint64_t gen() const { return word >> 54; }
  uint64_t buckets() const { return 1ull << log2(); }
};

inline uint64_t PackGeometry(uint64_t array, int log2, uint64_t gen) {
  return array | static_cast<uint64_t>(log2) << 48 | (gen & 1023) << 54;
}

struct Table {
  uint64_t header = 0;
  uint64_t id = 0;
  Geometry geometry;
};

// Where an operation checks that its key's slot is served here (core/slots.h): the slot and its
// fence entry; entry 0 means no check (a server outside any cluster, or an unfenced caller).
struct Fence {
  uint64_t entry = 0;
  uint32_t slot = 0;
  // The call named its table by name: a replica can apply it as it is (a cached target names the
  // table by this server's addresses), so its writes of a replicated slot may go on.
  bool by_name = false;
};

inline uint64_t Tag(uint64_t id, uint64_t gen) { return id << 32 | (gen & 1023) << 22; }
inline uint64_t TagOf(uint64_t control) { return control & ~((1ull << 22) - 1); }
inline uint64_t StateOf(uint64_t control) { return control & kStateMask; }
// `control` locked by the owner of lock-owner slot `slot` (core/context/lock_owner.h).
inline uint64_t LockedBy(uint64_t control, uint64_t slot) {
  return TagOf(control) | (slot & kSeqMask) << 2 | kLocked;
}
// The unlocked word after `control` (unlocked, sequence s): sequence s + 1.
inline uint64_t NextUnlocked(uint64_t control) {
  return TagOf(control) | (((control >> 2) + 1) & kSeqMask) << 2 | kUnlocked;
}
inline uint64_t HolderSlot(uint64_t control) { return (control >> 2) & kSeqMask; }

inline uint64_t Fingerprint(uint64_t hash) { return hash >> 50; }  // 14 bits
inline uint64_t MakeSlot(uint64_t entry, int cls, uint64_t fp) {
  return entry | static_cast<uint64_t>(cls) << 48 | (fp >> 4) << 54 | (fp & 15);
}
inline uint64_t SlotEntry(uint64_t slot) { return slot & kAddrMask; }
inline int SlotClass(uint64_t slot) { return static_cast<int>((slot >> 48) & 63); }
inline uint64_t SlotFingerprint(uint64_t slot) { return (slot >> 54) << 4 | (slot & 15); }

// The two buckets of a key's neighbourhood, as one READ saw them.
struct Neighbourhood {
  uint64_t home = 0;
  uint64_t base = 0;  // address of the home bucket
  uint64_t control[2];
  uint64_t slots[kNeighbourhoodSlots];
  uint64_t SlotAddr(int i) const {
    return base + (i / kSlotsPerBucket) * kBucketBytes + 8 + 8 * (i % kSlotsPerBucket);
  }
};

absl::StatusOr<Neighbourhood> ReadNeighbourhood(Context& ctx, const Table& t, uint64_t hash);
// True if both buckets belong to this table's current array and are not moved.
bool Current(const Table& t, const Neighbourhood& nb);

// The table whose header is at `header`; a stale-root InvalidArgument if there is none.
absl::StatusOr<Table> ReadTable(Context& ctx, uint64_t header);
// Re-reads the geometry after a stale neighbourhood. DataLoss (stale-root) if it did not change.
absl::Status Refresh(Context& ctx, Table& t);
// Creates an empty table and publishes it as root `root`; returns the header that root names
// (another creator's, if it won the race).
absl::StatusOr<uint64_t> CreateTable(Context& ctx, std::string_view root);

// A held bucket lock: the control word while held (the holder's slot in the sequence bits) and the
// one Unlock leaves (the sequence the lock was taken from, plus one). Every lock-unlock cycle so
// changes the unlocked word, which is what lets a writer trust a neighbourhood it read before it
// locked: if its CAS from the unlocked word it read succeeds, nobody held the lock in between.
struct BucketLock {
  uint64_t locked = 0;
  uint64_t unlocked = 0;
};

// Locks the home bucket of `nb`. nullopt if the neighbourhood is stale (moved or a different
// array): refresh and retry. On success nb is current; pass the lock to Unlock.
absl::StatusOr<std::optional<BucketLock>> LockHome(Context& ctx, Table& t, Neighbourhood& nb,
                                                   uint64_t hash, bool resizing);
absl::Status Unlock(Context& ctx, uint64_t bucket, const BucketLock& lock);

// Reads or writes [addr, addr + size) in transfers the wire allows.
absl::Status ReadLarge(Context& ctx, uint64_t addr, std::span<char> out);
absl::Status WriteLarge(Context& ctx, uint64_t addr, std::string_view data);

// Doubles the bucket array of `t` (geometry `seen`), unless someone already has. On return the
// caller re-reads the geometry. (dht_resize.cc)
absl::Status Grow(Context& ctx, Table& t, Geometry seen);

}  // namespace ardma::dht

#endif  // ARDMA_SERVICES_DHT_DHT_TABLE_H_
