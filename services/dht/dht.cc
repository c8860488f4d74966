#include "services/dht/dht.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/container/fixed_array.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht_table.h"
#include "services/random64.h"
#include "services/stable_hash.h"

namespace ardma::dht {

using wire::ByteWriter;
namespace {

// ---- Entries ----

uint64_t KeyHash(std::string_view key) { return StableHash(key, kKeyHashSeed); }

uint64_t EntryChecksum(uint64_t table_id, std::string_view body) {
  return StableHash(body, table_id);
}

// An entry's bytes as read: a small entry (the usual) stays off the heap.
using EntryBytes = absl::InlinedVector<char, 112>;
std::string_view View(const EntryBytes& bytes) { return {bytes.data(), bytes.size()}; }

// A verified entry: its checksum matched, so its key and value are what a writer published.
struct Entry {
  EntryBytes bytes;  // the whole entry
  uint32_t key_len = 0, value_len = 0;
  std::string_view key() const {
    return View(bytes).substr(kEntryHeaderBytes, key_len);
  }
  std::string_view value() const {
    return View(bytes).substr(kEntryHeaderBytes + key_len, value_len);
  }
};

// Parses what was read of an entry; reads the rest if it is longer than the first read. nullopt
// when the bytes are not a valid entry of this table (it was freed, or reused, under us).
absl::StatusOr<std::optional<Entry>> CompleteEntry(Context& ctx, const Table& t, uint64_t slot,
                                                   EntryBytes bytes) {
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
  if (EntryChecksum(t.id, View(bytes).substr(8)) != checksum) return std::nullopt;
  e.bytes = std::move(bytes);
  return e;
}

struct Search {
  bool stale = false;  // an entry failed verification: the caller may need to retry
  int index = -1;      // neighbourhood slot holding the key, or -1
  std::optional<Entry> entry;
};

// Reads the entries whose fingerprint matches (one batch) and finds the key among them. With a
// fence, its word is read in the same batch (or alone, if no entry matches) and checked: a slot
// not served here fails with a redirect status.
absl::StatusOr<Search> FindKey(Context& ctx, const Table& t, const Neighbourhood& nb,
                               std::string_view key, uint64_t hash, const Fence& fence = {},
                               bool write = false) {
  Search result;
  absl::InlinedVector<int, kNeighbourhoodSlots> candidates;
  for (int i = 0; i < kNeighbourhoodSlots; ++i) {
    if (nb.slots[i] != 0 && SlotFingerprint(nb.slots[i]) == Fingerprint(hash)) {
      candidates.push_back(i);
    }
  }
  uint64_t fence_words[2] = {0, 0};
  auto check_fence = [&] {
    return ctx.CheckSlot(fence.slot, fence_words[0], fence_words[1], write, fence.by_name);
  };
  if (candidates.empty()) {
    if (fence.entry != 0) {
      ARDMA_RETURN_IF_ERROR(
          ctx.Read(fence.entry, std::span<char>(reinterpret_cast<char*>(fence_words), 16)));
      ARDMA_RETURN_IF_ERROR(check_fence());
    }
    return result;
  }
  absl::InlinedVector<EntryBytes, 2> bytes(candidates.size());
  absl::InlinedVector<ReadOp, 3> ops;
  for (size_t c = 0; c < candidates.size(); ++c) {
    uint64_t slot = nb.slots[candidates[c]];
    uint64_t capacity = (1ull << SlotClass(slot)) - heap::kBlockHeader;
    bytes[c].resize(std::min(capacity, kFirstEntryRead));
    if (bytes[c].size() < kEntryHeaderBytes) bytes[c].resize(kEntryHeaderBytes);
    ops.push_back({SlotEntry(slot), std::span<char>(bytes[c])});
  }
  if (fence.entry != 0) {
    ops.push_back({fence.entry, std::span<char>(reinterpret_cast<char*>(fence_words), 16)});
  }
  absl::Status read = ctx.ReadBatch(ops);
  if (absl::IsOutOfRange(read)) {
    result.stale = true;  // a slot changed under us and pointed at nonsense
    return result;
  }
  ARDMA_RETURN_IF_ERROR(read);
  if (fence.entry != 0) ARDMA_RETURN_IF_ERROR(check_fence());
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

}  // namespace

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

absl::StatusOr<Table> Resolve(Context& ctx, const Target& target, bool create) {
  if (target.header == 0) return OpenByName(ctx, target.name, create);
  if (target.geometry == 0 || target.id == 0) return ReadTable(ctx, target.header);
  return Table{target.header, target.id, Geometry{target.geometry}};
}

absl::StatusOr<Fence> FenceOf(Context& ctx, const Target& target, std::string_view key) {
  if (target.fence != 0) return Fence{target.fence, target.slot};
  if (target.header != 0 || target.unfenced) return Fence{};
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> fence, heap::FindRoot(ctx, slots::kFenceRoot));
  if (!fence) return Fence{};
  uint32_t slot = slots::SlotOf(target.name, key);
  return Fence{slots::FenceEntry(*fence, slot), slot, /*by_name=*/true};
}

absl::Status Missing(Context& ctx, const absl::Status& resolved, const Fence& fence, bool write) {
  if (resolved.ok()) return resolved;
  if (absl::IsNotFound(resolved) && fence.entry != 0) {
    uint64_t words[2];
    ARDMA_RETURN_IF_ERROR(
        ctx.Read(fence.entry, std::span<char>(reinterpret_cast<char*>(words), sizeof(words))));
    ARDMA_RETURN_IF_ERROR(ctx.CheckSlot(fence.slot, words[0], words[1], write, fence.by_name));
  }
  return resolved;
}

absl::StatusOr<Found> ReadKey(Context& ctx, const Target& target, std::string_view key,
                              std::string* value, EntryRef* ref) {
  ARDMA_ASSIGN_OR_RETURN(Fence fence, FenceOf(ctx, target, key));
  absl::StatusOr<Table> t = Resolve(ctx, target, /*create=*/false);
  ARDMA_RETURN_IF_ERROR(Missing(ctx, t.status(), fence, /*write=*/false));
  ARDMA_ASSIGN_OR_RETURN(bool present, Lookup(ctx, *t, key, value, fence, ref));
  return Found{*t, present};
}

absl::StatusOr<bool> ReadCached(Context& ctx, const Target& target, std::string_view key,
                                const EntryRef& ref, std::string* value) {
  if (target.id == 0 || ref.size < kEntryHeaderBytes + key.size() || ref.size > kFirstEntryRead) {
    return false;
  }
  ARDMA_ASSIGN_OR_RETURN(Fence fence, FenceOf(ctx, target, key));
  absl::FixedArray<char, 256> bytes(ref.size);
  uint64_t fence_words[2] = {0, 0};
  ReadOp ops[2] = {{ref.addr, std::span<char>(bytes.data(), bytes.size())},
                   {fence.entry, std::span<char>(reinterpret_cast<char*>(fence_words), 16)}};
  absl::Status read = ctx.ReadBatch(std::span<const ReadOp>(ops, fence.entry != 0 ? 2 : 1));
  if (absl::IsOutOfRange(read)) return false;  // the server's memory is not what it was
  ARDMA_RETURN_IF_ERROR(read);
  if (fence.entry != 0) {
    ARDMA_RETURN_IF_ERROR(ctx.CheckSlot(fence.slot, fence_words[0], fence_words[1], false));
  }
  uint64_t checksum;
  uint32_t key_len, value_len;
  std::memcpy(&checksum, bytes.data(), 8);
  std::memcpy(&key_len, bytes.data() + 16, 4);
  std::memcpy(&value_len, bytes.data() + 20, 4);
  // The same write (its checksum), whole (the bytes check against it), not retired (its lengths).
  std::string_view entry(bytes.data(), bytes.size());
  if (checksum != ref.checksum || key_len != key.size() ||
      kEntryHeaderBytes + key_len + uint64_t{value_len} != ref.size ||
      EntryChecksum(target.id, entry.substr(8)) != checksum ||
      entry.substr(kEntryHeaderBytes, key_len) != key) {
    return false;
  }
  if (value != nullptr) value->assign(entry.substr(kEntryHeaderBytes + key_len));
  return true;
}

// ---- Operations ----

absl::StatusOr<bool> Lookup(Context& ctx, Table& t, std::string_view key, std::string* value,
                            const Fence& fence, EntryRef* ref) {
  uint64_t hash = KeyHash(key);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Neighbourhood nb, ReadNeighbourhood(ctx, t, hash));
    if (!Current(t, nb)) {
      ARDMA_RETURN_IF_ERROR(Refresh(ctx, t));
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(Search found, FindKey(ctx, t, nb, key, hash, fence));
    if (found.entry) {
      if (value != nullptr) value->assign(found.entry->value());
      if (ref != nullptr && found.entry->bytes.size() <= kFirstEntryRead) {  // one READ's worth
        ref->addr = SlotEntry(nb.slots[found.index]);
        std::memcpy(&ref->checksum, found.entry->bytes.data(), 8);
        ref->size = static_cast<uint32_t>(found.entry->bytes.size());
      }
      return true;
    }
    if (!found.stale) return false;
    if (attempt > 2) ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
  }
  return absl::AbortedError("dht read kept meeting entries freed under it");
}

namespace {

// Writes a new entry for (key, value). Returns its slot word (without position).
absl::StatusOr<uint64_t> WriteEntry(Context& ctx, const Table& t, std::string_view key,
                                    std::string_view value, uint64_t hash) {
  uint64_t size = kEntryHeaderBytes + key.size() + value.size();
  std::string bytes;
  bytes.reserve(size);
  ByteWriter w(&bytes);
  w.U64(0);
  w.U64((hash & kEntryHashMask) | Random64() << kMaxLog2Buckets);
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

// Frees the entry of `slot`, which no bucket holds any more, after marking it retired: a client
// that cached its address (ReadCached) reads the mark from then on, so once the writer answers,
// nobody takes the entry for current.
absl::Status Retire(Context& ctx, uint64_t slot) {
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(SlotEntry(slot) + 16, kRetiredLengths));
  return heap::Free(ctx, SlotEntry(slot));
}

// put (insert or replace; answers whether it created the key) and insert (only if absent;
// answers whether the key existed, and if so stores its value in *existing and leaves it alone).
absl::StatusOr<bool> Write(Context& ctx, Table& t, std::string_view key, std::string_view value,
                           bool only_if_absent, std::string* existing, const Fence& fence) {
  uint64_t hash = KeyHash(key);
  ARDMA_ASSIGN_OR_RETURN(uint64_t new_slot, WriteEntry(ctx, t, key, value, hash));
  absl::Status status;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    absl::StatusOr<Neighbourhood> nb = ReadNeighbourhood(ctx, t, hash);
    if (!nb.ok()) {
      status = nb.status();
      break;
    }
    absl::StatusOr<std::optional<BucketLock>> lock =
        Current(t, *nb) ? LockHome(ctx, t, *nb, hash, false) : std::optional<BucketLock>();
    if (!lock.ok()) {
      status = lock.status();
      break;
    }
    if (!*lock) {
      status = Refresh(ctx, t);
      if (!status.ok()) break;
      continue;
    }
    BucketLock locked = **lock;
    // Under the lock, the key's slot cannot change; other keys may take empty slots.
    absl::StatusOr<Search> found = FindKey(ctx, t, *nb, key, hash, fence, /*write=*/true);
    if (!found.ok()) {
      Unlock(ctx, nb->base, locked).IgnoreError();
      status = found.status();
      break;
    }
    if (only_if_absent && found->entry) {
      existing->assign(found->entry->value());
      status = Unlock(ctx, nb->base, locked);
      heap::Free(ctx, SlotEntry(new_slot)).IgnoreError();
      ARDMA_RETURN_IF_ERROR(status);
      return true;
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
        ARDMA_RETURN_IF_ERROR(Retire(ctx, old_slot));
      } else {
        ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(t.header + kCountOffset, 1).status());
      }
      ARDMA_RETURN_IF_ERROR(unlocked);
      return only_if_absent ? false : old_slot == 0;
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

}  // namespace

absl::StatusOr<bool> Put(Context& ctx, Table& t, std::string_view key, std::string_view value,
                         const Fence& fence) {
  return Write(ctx, t, key, value, /*only_if_absent=*/false, nullptr, fence);
}

absl::StatusOr<bool> Insert(Context& ctx, Table& t, std::string_view key, std::string_view value,
                            std::string* existing, const Fence& fence) {
  return Write(ctx, t, key, value, /*only_if_absent=*/true, existing, fence);
}

absl::StatusOr<bool> Remove(Context& ctx, Table& t, std::string_view key, const Fence& fence) {
  uint64_t hash = KeyHash(key);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Neighbourhood nb, ReadNeighbourhood(ctx, t, hash));
    std::optional<BucketLock> locked;
    if (Current(t, nb)) {
      ARDMA_ASSIGN_OR_RETURN(locked, LockHome(ctx, t, nb, hash, false));
    }
    if (!locked) {
      ARDMA_RETURN_IF_ERROR(Refresh(ctx, t));
      continue;
    }
    absl::StatusOr<Search> found = FindKey(ctx, t, nb, key, hash, fence, /*write=*/true);
    absl::StatusOr<CasResult> cas = CasResult{};
    if (found.ok() && found->entry) {
      cas = ctx.CompareAndSwap(nb.SlotAddr(found->index), nb.slots[found->index], 0);
    }
    absl::Status unlocked = Unlock(ctx, nb.base, *locked);
    ARDMA_RETURN_IF_ERROR(found.status());
    ARDMA_RETURN_IF_ERROR(cas.status());
    if (!found->entry) {
      ARDMA_RETURN_IF_ERROR(unlocked);
      return false;
    }
    if (!cas->swapped) return absl::DataLossError("dht slot changed under its bucket lock");
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(t.header + kCountOffset, ~0ull).status());
    ARDMA_RETURN_IF_ERROR(Retire(ctx, nb.slots[found->index]));
    ARDMA_RETURN_IF_ERROR(unlocked);
    return true;
  }
  return absl::AbortedError("dht.remove lost too many races");
}

absl::StatusOr<uint64_t> Size(Context& ctx, const Table& t) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t count, ctx.ReadU64(t.header + kCountOffset));
  // A put's +1 may land after a remove's -1 of the same key.
  return count > (1ull << 63) ? 0 : count;
}

namespace {

bool InBitmap(std::string_view bitmap, uint32_t slot) {
  return slot / 8 < bitmap.size() && ((static_cast<uint8_t>(bitmap[slot / 8]) >> (slot % 8)) & 1);
}

// The keys of bucket `b` (nb, locked) that Sweep wants: exported or removed. Returns the bytes
// (or keys, when purging) it handled.
absl::StatusOr<uint64_t> SweepBucket(Context& ctx, const Table& t, const Neighbourhood& nb,
                                     std::string_view table_name, std::string_view bitmap,
                                     SweepAction action, std::vector<Exported>* exported,
                                     uint64_t* removed) {
  uint64_t handled = 0;
  for (int i = 0; i < kNeighbourhoodSlots; ++i) {
    uint64_t slot = nb.slots[i];
    if (slot == 0) continue;
    uint64_t capacity = (1ull << SlotClass(slot)) - heap::kBlockHeader;
    EntryBytes bytes(std::max(std::min(capacity, kFirstEntryRead), kEntryHeaderBytes));
    absl::Status read = ctx.Read(SlotEntry(slot), std::span<char>(bytes));
    if (absl::IsOutOfRange(read)) continue;  // another bucket's key, changing under us
    ARDMA_RETURN_IF_ERROR(read);
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, CompleteEntry(ctx, t, slot, std::move(bytes)));
    if (!e) continue;  // the same
    uint64_t hash;
    std::memcpy(&hash, e->bytes.data() + 8, 8);
    if ((hash & (t.geometry.buckets() - 1)) != nb.home) continue;  // homed elsewhere
    if (!InBitmap(bitmap, slots::SlotOf(table_name, e->key()))) continue;
    if (action == SweepAction::kExport) {
      exported->push_back({std::string(e->key()), std::string(e->value())});
      handled += e->key().size() + e->value().size() + 8;
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(nb.SlotAddr(i), slot, 0));
    if (!cas.swapped) return absl::DataLossError("dht slot changed under its bucket lock");
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(t.header + kCountOffset, ~0ull).status());
    ARDMA_RETURN_IF_ERROR(Retire(ctx, slot));
    ++*removed;
    handled += 64;
  }
  return handled;
}

}  // namespace

absl::StatusOr<uint64_t> Sweep(Context& ctx, Table& t, std::string_view table_name,
                               std::string_view slots_bitmap, SweepAction action, uint64_t cursor,
                               uint64_t budget, std::vector<Exported>* exported,
                               uint64_t* removed) {
  uint64_t handled = 0;
  for (uint64_t b = cursor; b < t.geometry.buckets(); ++b) {
    if (handled >= budget && b > cursor) return b;
    ARDMA_ASSIGN_OR_RETURN(Neighbourhood nb, ReadNeighbourhood(ctx, t, b));
    if (!Current(t, nb)) return kRescan;
    ARDMA_ASSIGN_OR_RETURN(std::optional<BucketLock> lock, LockHome(ctx, t, nb, b, false));
    if (!lock) return kRescan;
    absl::StatusOr<uint64_t> done =
        SweepBucket(ctx, t, nb, table_name, slots_bitmap, action, exported, removed);
    absl::Status unlocked = Unlock(ctx, nb.base, *lock);
    ARDMA_RETURN_IF_ERROR(done.status());
    ARDMA_RETURN_IF_ERROR(unlocked);
    handled += *done + 1;
  }
  return 0;
}

namespace {

uint64_t ReverseBits(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 64; ++i, v >>= 1) r = r << 1 | (v & 1);
  return r;
}

// Reverse-binary increment of `v` under `mask` (a power of two minus one): the next home bucket
// in SCAN order, 0 after the last.
uint64_t NextCursor(uint64_t v, uint64_t mask) {
  v |= ~mask;
  v = ReverseBits(v);
  ++v;
  return ReverseBits(v);
}

// How a read of one home bucket went: its keys appended, the geometry stale (refresh), or an
// entry changed under the read (read it again). Nothing is appended unless kRead.
enum class HomeRead { kRead, kStale, kInFlux };

// The keys homed in bucket `home` (under t's geometry) and their values, appended to *out.
absl::StatusOr<HomeRead> ScanHome(Context& ctx, const Table& t, uint64_t home,
                                  std::vector<Exported>* out) {
  ARDMA_ASSIGN_OR_RETURN(Neighbourhood nb, ReadNeighbourhood(ctx, t, home));
  if (!Current(t, nb)) return HomeRead::kStale;
  std::vector<int> used;
  std::vector<EntryBytes> bytes;
  std::vector<ReadOp> ops;
  for (int i = 0; i < kNeighbourhoodSlots; ++i) {
    if (nb.slots[i] != 0) used.push_back(i);
  }
  bytes.resize(used.size());
  for (size_t u = 0; u < used.size(); ++u) {
    uint64_t slot = nb.slots[used[u]];
    uint64_t capacity = (1ull << SlotClass(slot)) - heap::kBlockHeader;
    bytes[u].resize(std::max(std::min(capacity, kFirstEntryRead), kEntryHeaderBytes));
    ops.push_back({SlotEntry(slot), std::span<char>(bytes[u])});
  }
  if (!ops.empty()) {
    absl::Status read = ctx.ReadBatch(ops);
    if (absl::IsOutOfRange(read)) return HomeRead::kInFlux;  // a slot changed under us
    ARDMA_RETURN_IF_ERROR(read);
  }
  std::vector<Exported> found;
  for (size_t u = 0; u < used.size(); ++u) {
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e,
                           CompleteEntry(ctx, t, nb.slots[used[u]], std::move(bytes[u])));
    if (!e) return HomeRead::kInFlux;  // freed or reused under us
    uint64_t hash;
    std::memcpy(&hash, e->bytes.data() + 8, 8);
    if ((hash & (t.geometry.buckets() - 1)) != home) continue;  // homed in the other bucket
    found.push_back({std::string(e->key()), std::string(e->value())});
  }
  for (Exported& e : found) out->push_back(std::move(e));
  return HomeRead::kRead;
}

}  // namespace

absl::StatusOr<uint64_t> Scan(Context& ctx, Table& t, uint64_t cursor, size_t count,
                              std::vector<Exported>* out) {
  const size_t want = std::max<size_t>(count, 1);
  const size_t start = out->size();
  size_t buckets = 0;
  uint64_t v = cursor;
  do {
    // One home bucket at the geometry now; a resize under it sends the step to the new one,
    // where the cursor goes on (its buckets are the old one's halves, next in this order).
    for (int attempt = 0;; ++attempt) {
      if (attempt >= kMaxAttempts) {
        return absl::AbortedError("dht scan kept meeting entries freed under it");
      }
      ARDMA_ASSIGN_OR_RETURN(HomeRead read,
                             ScanHome(ctx, t, v & (t.geometry.buckets() - 1), out));
      if (read == HomeRead::kRead) break;
      if (read == HomeRead::kStale) {
        ARDMA_RETURN_IF_ERROR(Refresh(ctx, t));
      } else if (attempt > 2) {
        ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
      }
    }
    v = NextCursor(v, t.geometry.buckets() - 1);
    ++buckets;
  } while (v != 0 && out->size() - start < want && buckets < 8 * want);
  return v;
}

}  // namespace ardma::dht
