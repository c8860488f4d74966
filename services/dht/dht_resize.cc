// The hash table's resize: a claimed, stop-the-writers doubling of the bucket array (the
// protocol is in dht_format.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "services/dht/dht_table.h"
#include "services/lock_word.h"

namespace ardma::dht {
namespace {

absl::Status ClaimResize(Context& ctx, const Table& t, Geometry seen, uint64_t nonce,
                         bool* claimed) {
  *claimed = false;
  for (int round = 0; round < kMaxAttempts; ++round) {
    ARDMA_ASSIGN_OR_RETURN(Table now, ReadTable(ctx, t.header));
    if (now.geometry.word != seen.word) return absl::OkStatus();  // someone else grew it
    ARDMA_ASSIGN_OR_RETURN(uint64_t claim, ctx.ReadU64(t.header + kClaimOffset));
    uint64_t expected = 0;
    if (claim != 0) {
      bool ended = false;
      if (TimeToCheckHolder(round)) {
        ARDMA_ASSIGN_OR_RETURN(ended, HolderEnded(ctx, claim));
      }
      if (!ended) {
        ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
        continue;
      }
      expected = claim;  // the resizer's connection ended: take over
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

}  // namespace

absl::Status Grow(Context& ctx, Table& t, Geometry seen) {
  uint64_t nonce = NewHolderValue(ctx);
  bool claimed;
  ARDMA_RETURN_IF_ERROR(ClaimResize(ctx, t, seen, nonce, &claimed));
  if (!claimed) return absl::OkStatus();
  t.geometry = seen;
  uint64_t buckets = seen.buckets();
  std::vector<BucketLock> locks(buckets);
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
    absl::StatusOr<std::optional<BucketLock>> lock =
        LockHome(ctx, t, nb, locked, /*resizing=*/true);
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
    while (log2 <= kMaxLog2Buckets && !Place(slots, t.id, log2, seen.gen() + 1, &bytes)) ++log2;
    absl::StatusOr<uint64_t> array =
        log2 <= kMaxLog2Buckets
            ? heap::Allocate(ctx, bytes.size())
            : absl::ResourceExhaustedError("a dht table has at most 2^40 buckets");
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
      moved[b] = (b < buckets ? locks[b].locked : Tag(t.id, seen.gen())) & ~kStateMask;
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
    if (locks[b].locked != 0) Unlock(ctx, seen.array() + b * kBucketBytes, locks[b]).IgnoreError();
  }
  ctx.CompareAndSwap(t.header + kClaimOffset, nonce, 0).IgnoreError();
  return status;
}

}  // namespace ardma::dht
