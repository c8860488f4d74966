// The "dht" active-code library: a hash table in server memory, written once against Context.
// Layout, protocol and encoding: dht_format.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht_format.h"
#include "services/stable_hash.h"

namespace ardma::dht {
namespace {

using wire::ByteReader;
using wire::ByteWriter;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kHeaderMagic = 0x314844414d445241ull;  // "ARDMADH1"
constexpr uint64_t kHeaderBytes = 40;
constexpr uint64_t kGeometryOffset = 16;
constexpr uint64_t kCountOffset = 24;
constexpr uint64_t kClaimOffset = 32;
constexpr int kInitialLog2Buckets = 4;
constexpr uint64_t kBucketBytes = 64;
constexpr int kSlotsPerBucket = 7;
constexpr int kNeighbourhoodSlots = 2 * kSlotsPerBucket;
constexpr uint64_t kEntryHeaderBytes = 24;
constexpr uint64_t kFirstEntryRead = 16u << 10;  // larger entries take one more READ
constexpr uint64_t kKeyHashSeed = 0x61726d6164687431ull;
constexpr uint64_t kAddrMask = ((1ull << 48) - 1) & ~15ull;
constexpr uint64_t kStateMask = 3, kUnlocked = 0, kLocked = 1, kMoved = 2;
constexpr uint64_t kSeqMask = (1ull << 20) - 1;
constexpr auto kLockStealAfter = std::chrono::seconds(1);
constexpr auto kClaimStealAfter = std::chrono::seconds(10);
constexpr int kMaxAttempts = 100000;
constexpr size_t kOpsPerBatch = 4096;
constexpr uint64_t kBytesPerTransfer = 8u << 20;

uint64_t Random64() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// ---- Geometry, buckets and slots ----

struct Geometry {
  uint64_t word = 0;
  uint64_t array() const { return word & kAddrMask; }
  int log2() const { return static_cast<int>((word >> 48) & 63); }
  uint64_t gen() const { return word >> 54; }
  uint64_t buckets() const { return 1ull << log2(); }
};

uint64_t PackGeometry(uint64_t array, int log2, uint64_t gen) {
  return array | static_cast<uint64_t>(log2) << 48 | (gen & 1023) << 54;
}

struct Table {
  uint64_t header = 0;
  uint64_t id = 0;
  Geometry geometry;
};

uint64_t Tag(uint64_t id, uint64_t gen) { return id << 32 | (gen & 1023) << 22; }
uint64_t TagOf(uint64_t control) { return control & ~((1ull << 22) - 1); }
uint64_t StateOf(uint64_t control) { return control & kStateMask; }
uint64_t NextLocked(uint64_t control) {
  uint64_t seq = ((control >> 2) + 1) & kSeqMask;
  return TagOf(control) | seq << 2 | kLocked;
}

uint64_t Fingerprint(uint64_t hash) { return hash >> 50; }  // 14 bits
uint64_t MakeSlot(uint64_t entry, int cls, uint64_t fp) {
  return entry | static_cast<uint64_t>(cls) << 48 | (fp >> 4) << 54 | (fp & 15);
}
uint64_t SlotEntry(uint64_t slot) { return slot & kAddrMask; }
int SlotClass(uint64_t slot) { return static_cast<int>((slot >> 48) & 63); }
uint64_t SlotFingerprint(uint64_t slot) { return (slot >> 54) << 4 | (slot & 15); }

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

absl::StatusOr<Neighbourhood> ReadNeighbourhood(Context& ctx, const Table& t, uint64_t hash) {
  Neighbourhood nb;
  nb.home = hash & (t.geometry.buckets() - 1);
  nb.base = t.geometry.array() + nb.home * kBucketBytes;
  char bytes[2 * kBucketBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(nb.base, std::span<char>(bytes, sizeof(bytes))));
  for (int b = 0; b < 2; ++b) {
    std::memcpy(&nb.control[b], bytes + b * kBucketBytes, 8);
    std::memcpy(&nb.slots[b * kSlotsPerBucket], bytes + b * kBucketBytes + 8, 8 * kSlotsPerBucket);
  }
  return nb;
}

// True if both buckets belong to this table's current array and are not moved.
bool Current(const Table& t, const Neighbourhood& nb) {
  uint64_t tag = Tag(t.id, t.geometry.gen());
  for (uint64_t c : nb.control) {
    if (TagOf(c) != tag || StateOf(c) == kMoved) return false;
  }
  return true;
}

// ---- The table header ----

absl::StatusOr<Table> ReadTable(Context& ctx, uint64_t header) {
  char bytes[24];
  ARDMA_RETURN_IF_ERROR(ctx.Read(header, std::span<char>(bytes, 24)));
  uint64_t magic;
  Table t;
  t.header = header;
  std::memcpy(&magic, bytes, 8);
  std::memcpy(&t.id, bytes + 8, 8);
  std::memcpy(&t.geometry.word, bytes + 16, 8);
  if (magic != kHeaderMagic) {
    return absl::InvalidArgumentError(absl::StrCat("no dht table header at address ", header));
  }
  return t;
}

// Re-reads the geometry after a stale neighbourhood. DataLoss if it did not change (the buckets
// are not what the header says: memory was overwritten).
absl::Status Refresh(Context& ctx, Table& t) {
  uint64_t before = t.geometry.word;
  ARDMA_ASSIGN_OR_RETURN(t, ReadTable(ctx, t.header));
  if (t.geometry.word == before) {
    // A resize publishes the geometry before marking buckets moved, so this is corruption,
    // unless the header was only just created under a stale cached geometry of 0.
    return absl::DataLossError("dht bucket array does not match its table header");
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CreateTable(Context& ctx, std::string_view root) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t header, heap::Allocate(ctx, kHeaderBytes));
  uint64_t id = 0;
  while ((id & 0xffffffffull) == 0) id = Random64() & 0xffffffffull;
  uint64_t buckets = 1ull << kInitialLog2Buckets;
  absl::StatusOr<uint64_t> array = heap::Allocate(ctx, (buckets + 1) * kBucketBytes);
  if (!array.ok()) {
    heap::Free(ctx, header).IgnoreError();
    return array.status();
  }
  std::string bytes((buckets + 1) * kBucketBytes, '\0');
  for (uint64_t b = 0; b <= buckets; ++b) {
    uint64_t control = Tag(id, 0);
    std::memcpy(bytes.data() + b * kBucketBytes, &control, 8);
  }
  std::string head;
  ByteWriter w(&head);
  w.U64(kHeaderMagic);
  w.U64(id);
  w.U64(PackGeometry(*array, kInitialLog2Buckets, 0));
  w.U64(0);
  w.U64(0);
  WriteOp writes[2] = {{*array, bytes}, {header, head}};
  absl::Status written = ctx.WriteBatch(writes);
  absl::StatusOr<uint64_t> published =
      written.ok() ? heap::GetOrCreateRoot(ctx, root, header) : absl::StatusOr<uint64_t>(written);
  if (!published.ok() || *published != header) {
    heap::Free(ctx, *array).IgnoreError();
    heap::Free(ctx, header).IgnoreError();
  }
  return published;
}

absl::StatusOr<Table> OpenByName(Context& ctx, std::string_view name, bool create) {
  ARDMA_RETURN_IF_ERROR(CheckName(name));
  std::string root = absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(name));
  absl::StatusOr<uint64_t> header = heap::GetRoot(ctx, root);
  if (absl::IsNotFound(header.status())) {
    if (!create) return absl::NotFoundError(absl::StrCat("no table named '", ToAbsl(name), "'"));
    header = CreateTable(ctx, root);
  }
  if (!header.ok()) return header.status();
  return ReadTable(ctx, *header);
}

absl::StatusOr<Table> ParseAndResolve(Context& ctx, ByteReader& r, bool create) {
  uint8_t kind;
  if (!r.U8(&kind)) return absl::InvalidArgumentError("dht: missing target");
  if (kind == 0) {
    std::string_view name;
    if (!r.Str16(&name)) return absl::InvalidArgumentError("dht: malformed target");
    return OpenByName(ctx, name, create);
  }
  Table t;
  if (kind != 1 || !r.U64(&t.header) || !r.U64(&t.id) || !r.U64(&t.geometry.word) ||
      t.header == 0) {
    return absl::InvalidArgumentError("dht: malformed target");
  }
  if (t.geometry.word == 0 || t.id == 0) return ReadTable(ctx, t.header);
  return t;
}

// ---- Entries ----

uint64_t KeyHash(std::string_view key) { return StableHash(key, kKeyHashSeed); }

uint64_t EntryChecksum(uint64_t table_id, std::string_view body) {
  return StableHash(body, table_id);
}

// A verified entry: its checksum matched, so its key and value are what a writer published.
struct Entry {
  std::string bytes;  // the whole entry
  uint32_t key_len = 0, value_len = 0;
  std::string_view key() const {
    return std::string_view(bytes).substr(kEntryHeaderBytes, key_len);
  }
  std::string_view value() const {
    return std::string_view(bytes).substr(kEntryHeaderBytes + key_len, value_len);
  }
};

// Parses what was read of an entry; reads the rest if it is longer than the first read. nullopt
// when the bytes are not a valid entry of this table (it was freed, or reused, under us).
absl::StatusOr<std::optional<Entry>> CompleteEntry(Context& ctx, const Table& t, uint64_t slot,
                                                   std::string bytes) {
  uint64_t capacity = (1ull << SlotClass(slot)) - heap::kBlockHeader;
  Entry e;
  uint64_t checksum;
  std::memcpy(&checksum, bytes.data(), 8);
  std::memcpy(&e.key_len, bytes.data() + 16, 4);
  std::memcpy(&e.value_len, bytes.data() + 20, 4);
  uint64_t size = kEntryHeaderBytes + e.key_len + e.value_len;
  if (size > capacity) return std::nullopt;
  if (size > bytes.size()) {
    uint64_t have = bytes.size();
    bytes.resize(size);
    absl::Status read = ctx.Read(SlotEntry(slot) + have, std::span<char>(bytes).subspan(have));
    if (absl::IsOutOfRange(read)) return std::nullopt;
    ARDMA_RETURN_IF_ERROR(read);
  }
  bytes.resize(size);
  if (EntryChecksum(t.id, std::string_view(bytes).substr(8)) != checksum) return std::nullopt;
  e.bytes = std::move(bytes);
  return e;
}

struct Lookup {
  bool stale = false;  // an entry failed verification: the caller may need to retry
  int index = -1;      // neighbourhood slot holding the key, or -1
  std::optional<Entry> entry;
};

// Reads the entries whose fingerprint matches (one batch) and finds the key among them.
absl::StatusOr<Lookup> FindKey(Context& ctx, const Table& t, const Neighbourhood& nb,
                               std::string_view key, uint64_t hash) {
  Lookup result;
  std::vector<int> candidates;
  for (int i = 0; i < kNeighbourhoodSlots; ++i) {
    if (nb.slots[i] != 0 && SlotFingerprint(nb.slots[i]) == Fingerprint(hash)) {
      candidates.push_back(i);
    }
  }
  if (candidates.empty()) return result;
  std::vector<std::string> bytes(candidates.size());
  std::vector<ReadOp> ops;
  for (size_t c = 0; c < candidates.size(); ++c) {
    uint64_t slot = nb.slots[candidates[c]];
    uint64_t capacity = (1ull << SlotClass(slot)) - heap::kBlockHeader;
    bytes[c].resize(std::min(capacity, kFirstEntryRead));
    if (bytes[c].size() < kEntryHeaderBytes) bytes[c].resize(kEntryHeaderBytes);
    ops.push_back({SlotEntry(slot), std::span<char>(bytes[c])});
  }
  absl::Status read = ctx.ReadBatch(ops);
  if (absl::IsOutOfRange(read)) {
    result.stale = true;  // a slot changed under us and pointed at nonsense
    return result;
  }
  ARDMA_RETURN_IF_ERROR(read);
  for (size_t c = 0; c < candidates.size(); ++c) {
    uint64_t slot = nb.slots[candidates[c]];
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e,
                           CompleteEntry(ctx, t, slot, std::move(bytes[c])));
    if (!e) {
      result.stale = true;
      continue;
    }
    if (e->key() == key) {
      result.index = candidates[c];
      result.entry = std::move(e);
      return result;
    }
  }
  return result;
}

// ---- Bucket locks ----

// Locks the home bucket of `nb`. nullopt if the neighbourhood is stale (moved or a different
// array): refresh and retry. On success the returned control value is the lock (pass it to
// Unlock) and nb is current.
absl::StatusOr<std::optional<uint64_t>> LockHome(Context& ctx, Table& t, Neighbourhood& nb,
                                                 uint64_t hash, bool resizing) {
  uint64_t control = nb.control[0];
  bool reread = false;
  uint64_t waited_on = 0;
  Clock::time_point since;
  for (int round = 0; round < kMaxAttempts; ++round) {
    if (TagOf(control) != Tag(t.id, t.geometry.gen()) || StateOf(control) == kMoved) {
      return std::nullopt;
    }
    if (StateOf(control) == kUnlocked) {
      ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                             ctx.CompareAndSwap(nb.base, control, NextLocked(control)));
      if (cas.swapped) {
        if (reread) {
          ARDMA_ASSIGN_OR_RETURN(nb, ReadNeighbourhood(ctx, t, hash));
        }
        return NextLocked(control);
      }
      control = cas.observed;
      reread = true;
      continue;
    }
    // Locked: wait, and take it over if its holder seems dead.
    if (control != waited_on) {
      waited_on = control;
      since = Clock::now();
    } else if (Clock::now() - since > kLockStealAfter) {
      ARDMA_ASSIGN_OR_RETURN(uint64_t claim, ctx.ReadU64(t.header + kClaimOffset));
      if (claim == 0 || resizing) {
        ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                               ctx.CompareAndSwap(nb.base, control, NextLocked(control)));
        if (cas.swapped) {
          ARDMA_ASSIGN_OR_RETURN(nb, ReadNeighbourhood(ctx, t, hash));
          return NextLocked(control);
        }
      }
      since = Clock::now();
    }
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
    ARDMA_ASSIGN_OR_RETURN(control, ctx.ReadU64(nb.base));
    reread = true;
  }
  return absl::AbortedError("dht bucket stayed locked");
}

absl::Status Unlock(Context& ctx, uint64_t bucket, uint64_t locked) {
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(bucket, locked, locked & ~kStateMask));
  if (!cas.swapped) {
    return absl::AbortedError(
        "dht bucket lock was taken over while held (the operation took over a second)");
  }
  return absl::OkStatus();
}

// ---- Resize ----

// Doubles the bucket array of `t` (geometry `seen`), unless someone already has. On return the
// caller re-reads the geometry.
absl::Status Grow(Context& ctx, Table& t, Geometry seen);

absl::Status ClaimResize(Context& ctx, const Table& t, Geometry seen, uint64_t nonce,
                         bool* claimed) {
  *claimed = false;
  uint64_t waited_on = 0;
  Clock::time_point since = Clock::now();
  for (int round = 0; round < kMaxAttempts; ++round) {
    ARDMA_ASSIGN_OR_RETURN(Table now, ReadTable(ctx, t.header));
    if (now.geometry.word != seen.word) return absl::OkStatus();  // someone else grew it
    ARDMA_ASSIGN_OR_RETURN(uint64_t claim, ctx.ReadU64(t.header + kClaimOffset));
    uint64_t expected = 0;
    if (claim != 0) {
      if (claim != waited_on) {
        waited_on = claim;
        since = Clock::now();
      }
      if (Clock::now() - since <= kClaimStealAfter) {
        ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
        continue;
      }
      expected = claim;  // the resizer died: take over
    }
    ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                           ctx.CompareAndSwap(t.header + kClaimOffset, expected, nonce));
    if (!cas.swapped) continue;
    ARDMA_ASSIGN_OR_RETURN(Table again, ReadTable(ctx, t.header));
    if (again.geometry.word != seen.word) {
      ARDMA_RETURN_IF_ERROR(ctx.CompareAndSwap(t.header + kClaimOffset, nonce, 0).status());
      return absl::OkStatus();
    }
    *claimed = true;
    return absl::OkStatus();
  }
  return absl::AbortedError("dht resize claim stayed taken");
}

// Reads [addr, addr + size) in transfers the wire allows.
absl::Status ReadLarge(Context& ctx, uint64_t addr, std::span<char> out) {
  for (uint64_t done = 0; done < out.size(); done += kBytesPerTransfer) {
    uint64_t n = std::min<uint64_t>(kBytesPerTransfer, out.size() - done);
    ARDMA_RETURN_IF_ERROR(ctx.Read(addr + done, out.subspan(done, n)));
  }
  return absl::OkStatus();
}

absl::Status WriteLarge(Context& ctx, uint64_t addr, std::string_view data) {
  for (uint64_t done = 0; done < data.size(); done += kBytesPerTransfer) {
    ARDMA_RETURN_IF_ERROR(ctx.Write(addr + done, data.substr(done, kBytesPerTransfer)));
  }
  return absl::OkStatus();
}

// Places `slots` (with their keys' hashes) into a fresh array of 2^log2 buckets. False if some
// neighbourhood overflows.
bool Place(const std::vector<std::pair<uint64_t, uint64_t>>& slots, uint64_t id, int log2,
           uint64_t gen, std::string* array) {
  uint64_t buckets = 1ull << log2;
  array->assign((buckets + 1) * kBucketBytes, '\0');
  for (uint64_t b = 0; b <= buckets; ++b) {
    uint64_t control = Tag(id, gen);
    std::memcpy(array->data() + b * kBucketBytes, &control, 8);
  }
  for (const auto& [slot, hash] : slots) {
    uint64_t home = hash & (buckets - 1);
    bool placed = false;
    for (int i = 0; i < kNeighbourhoodSlots && !placed; ++i) {
      char* p = array->data() + (home + i / kSlotsPerBucket) * kBucketBytes + 8 +
                8 * (i % kSlotsPerBucket);
      uint64_t existing;
      std::memcpy(&existing, p, 8);
      if (existing == 0) {
        std::memcpy(p, &slot, 8);
        placed = true;
      }
    }
    if (!placed) return false;
  }
  return true;
}

absl::Status Grow(Context& ctx, Table& t, Geometry seen) {
  uint64_t nonce = Random64() | 1;
  bool claimed;
  ARDMA_RETURN_IF_ERROR(ClaimResize(ctx, t, seen, nonce, &claimed));
  if (!claimed) return absl::OkStatus();
  t.geometry = seen;
  uint64_t buckets = seen.buckets();
  std::vector<uint64_t> locks(buckets);
  uint64_t locked = 0;
  absl::Status status;
  // Lock every home bucket: then no writer is inside.
  for (; locked < buckets && status.ok(); ++locked) {
    Neighbourhood nb;
    nb.home = locked;
    nb.base = seen.array() + locked * kBucketBytes;
    absl::StatusOr<uint64_t> control = ctx.ReadU64(nb.base);
    if (!control.ok()) {
      status = control.status();
      break;
    }
    nb.control[0] = nb.control[1] = *control;
    absl::StatusOr<std::optional<uint64_t>> lock = LockHome(ctx, t, nb, locked, /*resizing=*/true);
    if (!lock.ok()) {
      status = lock.status();
    } else if (!*lock) {
      status = absl::DataLossError("dht bucket moved during a claimed resize");
    } else {
      locks[locked] = **lock;
    }
    if (!status.ok()) break;
  }
  std::string old_array((buckets + 1) * kBucketBytes, '\0');
  std::vector<std::pair<uint64_t, uint64_t>> slots;  // slot, key hash
  if (status.ok()) status = ReadLarge(ctx, seen.array(), std::span<char>(old_array));
  if (status.ok()) {
    for (uint64_t b = 0; b <= buckets; ++b) {
      for (int i = 0; i < kSlotsPerBucket; ++i) {
        uint64_t slot;
        std::memcpy(&slot, old_array.data() + b * kBucketBytes + 8 + 8 * i, 8);
        if (slot != 0) slots.push_back({slot, 0});
      }
    }
    // The keys' hashes, from the entries (which do not move), a batch at a time.
    for (size_t first = 0; first < slots.size() && status.ok(); first += kOpsPerBatch) {
      size_t n = std::min(kOpsPerBatch, slots.size() - first);
      std::vector<ReadOp> ops(n);
      for (size_t i = 0; i < n; ++i) {
        ops[i] = {SlotEntry(slots[first + i].first) + 8,
                  std::span<char>(reinterpret_cast<char*>(&slots[first + i].second), 8)};
      }
      status = ctx.ReadBatch(ops);
    }
  }
  uint64_t new_array = 0;
  Geometry next;
  if (status.ok()) {
    std::string bytes;
    int log2 = seen.log2() + 1;
    while (!Place(slots, t.id, log2, seen.gen() + 1, &bytes)) ++log2;
    absl::StatusOr<uint64_t> array = heap::Allocate(ctx, bytes.size());
    if (!array.ok()) {
      status = array.status();
    } else {
      new_array = *array;
      next.word = PackGeometry(new_array, log2, seen.gen() + 1);
      status = WriteLarge(ctx, new_array, bytes);
    }
  }
  if (status.ok()) {
    absl::StatusOr<CasResult> published =
        ctx.CompareAndSwap(t.header + kGeometryOffset, seen.word, next.word);
    if (!published.ok()) {
      status = published.status();
    } else if (!published->swapped) {
      status = absl::DataLossError("dht geometry changed under a claimed resize");
    }
  }
  if (status.ok()) {
    // Mark the old buckets moved (they stay locked for good), release the claim, free the array.
    std::vector<uint64_t> moved(buckets + 1);
    for (uint64_t b = 0; b <= buckets; ++b) {
      moved[b] = (b < buckets ? locks[b] : Tag(t.id, seen.gen())) & ~kStateMask;
      moved[b] |= kMoved;
    }
    for (uint64_t first = 0; first <= buckets && status.ok(); first += kOpsPerBatch) {
      uint64_t n = std::min<uint64_t>(kOpsPerBatch, buckets + 1 - first);
      std::vector<WriteOp> ops(n);
      for (uint64_t i = 0; i < n; ++i) {
        ops[i] = {seen.array() + (first + i) * kBucketBytes,
                  std::string_view(reinterpret_cast<const char*>(&moved[first + i]), 8)};
      }
      status = ctx.WriteBatch(ops);
    }
    ARDMA_RETURN_IF_ERROR(status);
    ARDMA_RETURN_IF_ERROR(ctx.CompareAndSwap(t.header + kClaimOffset, nonce, 0).status());
    t.geometry = next;
    return heap::Free(ctx, seen.array());
  }
  // Failed (most likely out of memory): undo, leaving the table as it was.
  if (new_array != 0) heap::Free(ctx, new_array).IgnoreError();
  for (uint64_t b = 0; b < locked && b < buckets; ++b) {
    if (locks[b] != 0) Unlock(ctx, seen.array() + b * kBucketBytes, locks[b]).IgnoreError();
  }
  ctx.CompareAndSwap(t.header + kClaimOffset, nonce, 0).IgnoreError();
  return status;
}

// ---- Functions ----

absl::StatusOr<std::string_view> ParseKey(ByteReader& r) {
  std::string_view key;
  if (!r.Bytes32(&key)) return absl::InvalidArgumentError("dht: malformed key");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dht keys are at most ", kMaxKeyBytes, " bytes, not ", key.size()));
  }
  return key;
}

std::string EncodeReply(const Table& t, bool flag) {
  std::string out;
  ByteWriter w(&out);
  w.U64(t.geometry.word);
  w.U8(flag ? 1 : 0);
  return out;
}

absl::StatusOr<std::string> Open(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name) || !r.AtEnd()) return absl::InvalidArgumentError("dht.open takes a name");
  ARDMA_ASSIGN_OR_RETURN(Table t, OpenByName(ctx, name, /*create=*/true));
  std::string out;
  ByteWriter w(&out);
  w.U64(t.header);
  w.U64(t.id);
  w.U64(t.geometry.word);
  return out;
}

// get and contains: lock-free.
absl::StatusOr<std::string> Read(Context& ctx, std::string_view args, bool with_value) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Table t, ParseAndResolve(ctx, r, /*create=*/false));
  ARDMA_ASSIGN_OR_RETURN(std::string_view key, ParseKey(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dht: trailing bytes");
  uint64_t hash = KeyHash(key);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Neighbourhood nb, ReadNeighbourhood(ctx, t, hash));
    if (!Current(t, nb)) {
      ARDMA_RETURN_IF_ERROR(Refresh(ctx, t));
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(Lookup found, FindKey(ctx, t, nb, key, hash));
    if (found.entry) {
      std::string out = EncodeReply(t, true);
      if (with_value) ByteWriter(&out).Bytes32(found.entry->value());
      return out;
    }
    if (!found.stale) return EncodeReply(t, false);
    if (attempt > 2) ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
  }
  return absl::AbortedError("dht read kept meeting entries freed under it");
}

absl::StatusOr<std::string> Get(Context& ctx, std::string_view args) {
  return Read(ctx, args, /*with_value=*/true);
}

absl::StatusOr<std::string> Contains(Context& ctx, std::string_view args) {
  return Read(ctx, args, /*with_value=*/false);
}

// Writes a new entry for (key, value). Returns its slot word (without position).
absl::StatusOr<uint64_t> WriteEntry(Context& ctx, const Table& t, std::string_view key,
                                    std::string_view value, uint64_t hash) {
  uint64_t size = kEntryHeaderBytes + key.size() + value.size();
  std::string bytes;
  bytes.reserve(size);
  ByteWriter w(&bytes);
  w.U64(0);
  w.U64(hash);
  w.U32(static_cast<uint32_t>(key.size()));
  w.U32(static_cast<uint32_t>(value.size()));
  w.Bytes(key);
  w.Bytes(value);
  uint64_t checksum = EntryChecksum(t.id, std::string_view(bytes).substr(8));
  std::memcpy(bytes.data(), &checksum, 8);
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, heap::Allocate(ctx, size));
  absl::Status written = WriteLarge(ctx, addr, bytes);
  if (!written.ok()) {
    heap::Free(ctx, addr).IgnoreError();
    return written;
  }
  return MakeSlot(addr, heap::SizeClass(size), Fingerprint(hash));
}

// put (insert or replace; answers whether it created the key) and insert (only if absent;
// answers whether the key existed, and if so its value, which it leaves alone).
absl::StatusOr<std::string> Write(Context& ctx, std::string_view args, bool only_if_absent) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Table t, ParseAndResolve(ctx, r, /*create=*/true));
  ARDMA_ASSIGN_OR_RETURN(std::string_view key, ParseKey(r));
  std::string_view value;
  if (!r.Bytes32(&value) || !r.AtEnd()) return absl::InvalidArgumentError("dht.put: bad value");
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dht values are at most ", kMaxValueBytes, " bytes, not ", value.size()));
  }
  uint64_t hash = KeyHash(key);
  ARDMA_ASSIGN_OR_RETURN(uint64_t new_slot, WriteEntry(ctx, t, key, value, hash));
  absl::Status status;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    absl::StatusOr<Neighbourhood> nb = ReadNeighbourhood(ctx, t, hash);
    if (!nb.ok()) {
      status = nb.status();
      break;
    }
    absl::StatusOr<std::optional<uint64_t>> lock =
        Current(t, *nb) ? LockHome(ctx, t, *nb, hash, false) : std::optional<uint64_t>();
    if (!lock.ok()) {
      status = lock.status();
      break;
    }
    if (!*lock) {
      status = Refresh(ctx, t);
      if (!status.ok()) break;
      continue;
    }
    uint64_t locked = **lock;
    // Under the lock, the key's slot cannot change; other keys may take empty slots.
    absl::StatusOr<Lookup> found = FindKey(ctx, t, *nb, key, hash);
    if (!found.ok()) {
      Unlock(ctx, nb->base, locked).IgnoreError();
      status = found.status();
      break;
    }
    if (only_if_absent && found->entry) {
      std::string out = EncodeReply(t, true);
      ByteWriter(&out).Bytes32(found->entry->value());
      status = Unlock(ctx, nb->base, locked);
      heap::Free(ctx, SlotEntry(new_slot)).IgnoreError();
      ARDMA_RETURN_IF_ERROR(status);
      return out;
    }
    bool done = false, full = false;
    uint64_t old_slot = 0;
    absl::Status inner;
    for (int tries = 0; tries < kMaxAttempts && !done && !full && inner.ok(); ++tries) {
      int index = found->index;
      if (index < 0) {
        for (int i = 0; i < kNeighbourhoodSlots && index < 0; ++i) {
          if (nb->slots[i] == 0) index = i;
        }
        if (index < 0) {
          full = true;
          break;
        }
      }
      uint64_t expected = nb->slots[index];
      absl::StatusOr<CasResult> cas = ctx.CompareAndSwap(nb->SlotAddr(index), expected, new_slot);
      if (!cas.ok()) {
        inner = cas.status();
      } else if (cas->swapped) {
        done = true;
        old_slot = expected;
      } else if (found->index >= 0) {
        inner = absl::DataLossError("dht slot changed under its bucket lock");
      } else {
        nb->slots[index] = cas->observed;  // lost an empty slot to another key: try the next
      }
    }
    absl::Status unlocked = Unlock(ctx, nb->base, locked);
    if (!inner.ok()) {
      status = inner;
      break;
    }
    if (done) {
      if (old_slot != 0) {
        ARDMA_RETURN_IF_ERROR(heap::Free(ctx, SlotEntry(old_slot)));
      } else {
        ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(t.header + kCountOffset, 1).status());
      }
      ARDMA_RETURN_IF_ERROR(unlocked);
      return EncodeReply(t, only_if_absent ? false : old_slot == 0);
    }
    ARDMA_RETURN_IF_ERROR(unlocked);
    // The neighbourhood is full: grow the table, then try again.
    status = Grow(ctx, t, t.geometry);
    if (!status.ok()) break;
    ARDMA_ASSIGN_OR_RETURN(t, ReadTable(ctx, t.header));
  }
  heap::Free(ctx, SlotEntry(new_slot)).IgnoreError();
  if (status.ok()) status = absl::AbortedError("dht.put lost too many races");
  return status;
}

absl::StatusOr<std::string> Put(Context& ctx, std::string_view args) {
  return Write(ctx, args, /*only_if_absent=*/false);
}

absl::StatusOr<std::string> Insert(Context& ctx, std::string_view args) {
  return Write(ctx, args, /*only_if_absent=*/true);
}

absl::StatusOr<std::string> Remove(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Table t, ParseAndResolve(ctx, r, /*create=*/false));
  ARDMA_ASSIGN_OR_RETURN(std::string_view key, ParseKey(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dht.remove: trailing bytes");
  uint64_t hash = KeyHash(key);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Neighbourhood nb, ReadNeighbourhood(ctx, t, hash));
    std::optional<uint64_t> locked;
    if (Current(t, nb)) {
      ARDMA_ASSIGN_OR_RETURN(locked, LockHome(ctx, t, nb, hash, false));
    }
    if (!locked) {
      ARDMA_RETURN_IF_ERROR(Refresh(ctx, t));
      continue;
    }
    absl::StatusOr<Lookup> found = FindKey(ctx, t, nb, key, hash);
    absl::StatusOr<CasResult> cas = CasResult{};
    if (found.ok() && found->entry) {
      cas = ctx.CompareAndSwap(nb.SlotAddr(found->index), nb.slots[found->index], 0);
    }
    absl::Status unlocked = Unlock(ctx, nb.base, *locked);
    ARDMA_RETURN_IF_ERROR(found.status());
    ARDMA_RETURN_IF_ERROR(cas.status());
    if (!found->entry) {
      ARDMA_RETURN_IF_ERROR(unlocked);
      return EncodeReply(t, false);
    }
    if (!cas->swapped) return absl::DataLossError("dht slot changed under its bucket lock");
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(t.header + kCountOffset, ~0ull).status());
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, SlotEntry(nb.slots[found->index])));
    ARDMA_RETURN_IF_ERROR(unlocked);
    return EncodeReply(t, true);
  }
  return absl::AbortedError("dht.remove lost too many races");
}

absl::StatusOr<std::string> Size(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Table t, ParseAndResolve(ctx, r, /*create=*/false));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dht.size: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(uint64_t count, ctx.ReadU64(t.header + kCountOffset));
  std::string out;
  ByteWriter w(&out);
  w.U64(t.geometry.word);
  // A put's +1 may land after a remove's -1 of the same key.
  w.U64(count > (1ull << 63) ? 0 : count);
  return out;
}

}  // namespace
}  // namespace ardma::dht

ARDMA_ACTIVE_LIBRARY(dht, {"dht.open", &ardma::dht::Open}, {"dht.put", &ardma::dht::Put},
                     {"dht.insert", &ardma::dht::Insert},
                     {"dht.get", &ardma::dht::Get}, {"dht.contains", &ardma::dht::Contains},
                     {"dht.remove", &ardma::dht::Remove}, {"dht.size", &ardma::dht::Size});
