#include "services/dht/dht_table.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/context/lock_owner.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/lock_word.h"
#include "services/random64.h"
#include "services/root_cache.h"

namespace ardma::dht {

using wire::ByteWriter;

// ---- Neighbourhoods ----

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
    return StaleRootError(
        absl::InvalidArgumentError(absl::StrCat("no dht table header at address ", header)));
  }
  return t;
}

absl::Status Refresh(Context& ctx, Table& t) {
  uint64_t before = t.geometry.word;
  const uint64_t id = t.id;
  ARDMA_ASSIGN_OR_RETURN(t, ReadTable(ctx, t.header));
  if (id != 0 && t.id != id) {
    // Another table's header where a caller's cached target pointed (the server lost its memory
    // and made its tables again): not this table.
    return StaleRootError(absl::FailedPreconditionError(
        absl::StrCat("the dht table at address ", t.header, " is another table now")));
  }
  if (t.geometry.word == before) {
    // A resize publishes the geometry before marking buckets moved, so this is corruption,
    // unless the header was only just created under a stale cached geometry of 0.
    return StaleRootError(absl::DataLossError("dht bucket array does not match its table header"));
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

// ---- Bucket locks ----

absl::StatusOr<std::optional<BucketLock>> LockHome(Context& ctx, Table& t, Neighbourhood& nb,
                                                   uint64_t hash, bool resizing) {
  uint64_t control = nb.control[0];
  bool reread = false;
  uint64_t slot = owner::TokenSlot(ctx.lock_owner().token);
  for (int round = 0; round < kMaxAttempts; ++round) {
    if (TagOf(control) != Tag(t.id, t.geometry.gen()) || StateOf(control) == kMoved) {
      return std::nullopt;
    }
    if (StateOf(control) == kUnlocked) {
      ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                             ctx.CompareAndSwap(nb.base, control, LockedBy(control, slot)));
      if (cas.swapped) {
        if (reread) {
          ARDMA_ASSIGN_OR_RETURN(nb, ReadNeighbourhood(ctx, t, hash));
        }
        return BucketLock{LockedBy(control, slot), NextUnlocked(control)};
      }
      control = cas.observed;
      reread = true;
      continue;
    }
    // Locked: wait, and take it over if its holder's connection has ended.
    if (TimeToCheckHolder(round)) {
      ARDMA_ASSIGN_OR_RETURN(bool vacant, SlotVacant(ctx, HolderSlot(control)));
      // (Outside a resize, a claimed table's buckets are the resizer's to take over.)
      ARDMA_ASSIGN_OR_RETURN(uint64_t claim, vacant && !resizing
                                                 ? ctx.ReadU64(t.header + kClaimOffset)
                                                 : absl::StatusOr<uint64_t>(0));
      if (vacant && (claim == 0 || resizing)) {
        ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                               ctx.CompareAndSwap(nb.base, control, LockedBy(control, slot)));
        if (cas.swapped) {
          ARDMA_ASSIGN_OR_RETURN(nb, ReadNeighbourhood(ctx, t, hash));
          // (The sequence the dead holder took it from is gone: start one anew.)
          return BucketLock{LockedBy(control, slot),
                            NextUnlocked(TagOf(control) | (Random64() & kSeqMask) << 2)};
        }
      }
    }
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
    ARDMA_ASSIGN_OR_RETURN(control, ctx.ReadU64(nb.base));
    reread = true;
  }
  return absl::AbortedError("dht bucket stayed locked");
}

absl::Status Unlock(Context& ctx, uint64_t bucket, const BucketLock& lock) {
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(bucket, lock.locked, lock.unlocked));
  if (!cas.swapped) {
    return absl::AbortedError(
        "dht bucket lock was taken over while held (this client's connection had ended)");
  }
  return absl::OkStatus();
}

// ---- Transfers ----

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

}  // namespace ardma::dht
