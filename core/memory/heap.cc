#include "core/memory/heap.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/memory/heap_layout.h"
#include "core/status_macros.h"

namespace ardma::heap {
namespace {

using namespace internal;  // NOLINT: the layout's encoding, private to the heap

constexpr int kMaxCasRetries = 1 << 20;

// Gives pool bits [first, first + n) back, subtracting each word's mask (the bits are known set).
absl::Status ReleasePoolBits(Context& ctx, const Layout& l, uint64_t first, uint64_t n) {
  for (uint64_t p = first; p < first + n;) {
    uint64_t word = p / 64, bit = p % 64;
    uint64_t count = std::min<uint64_t>(64 - bit, first + n - p);
    uint64_t mask = (count == 64 ? ~0ull : ((1ull << count) - 1)) << bit;
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(l.pool + 8 * word, static_cast<uint64_t>(-mask)).status());
    p += count;
  }
  return absl::OkStatus();
}

// Claims pool bits [first, first + n) word by word, CASing each word from "all these bits clear".
// On a lost race it gives back the words it took (those before the one it lost) and returns false.
absl::StatusOr<bool> ClaimPoolBits(Context& ctx, const Layout& l, const Snapshot& pool,
                                   uint64_t first, uint64_t n) {
  for (uint64_t p = first; p < first + n;) {
    uint64_t word = p / 64, bit = p % 64;
    uint64_t count = std::min<uint64_t>(64 - bit, first + n - p);
    uint64_t mask = (count == 64 ? ~0ull : ((1ull << count) - 1)) << bit;
    uint64_t old = pool.Word(word);
    bool ok = false;
    for (int tries = 0; tries < 64 && !ok; ++tries) {
      if ((old & mask) != 0) break;
      ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(l.pool + 8 * word, old, old | mask));
      ok = cas.swapped;
      old = cas.observed;
    }
    if (!ok) {
      ARDMA_RETURN_IF_ERROR(ReleasePoolBits(ctx, l, first, p - first));
      return false;
    }
    p += count;
  }
  return true;
}

// Finds `n` contiguous free pages: the lowest run (runs), or the highest free page (slabs, n = 1).
std::optional<uint64_t> FindFreeRun(const Layout& l, const Snapshot& pool, uint64_t n,
                                    bool from_top) {
  if (from_top) {
    for (uint64_t w = l.pool_words(); w-- > 0;) {
      uint64_t used = pool.Word(w);
      if (w == l.pool_words() - 1 && l.pages % 64 != 0) used |= ~0ull << (l.pages % 64);
      if (used == ~0ull) continue;
      return w * 64 + (63 - std::countl_one(used));
    }
    return std::nullopt;
  }
  uint64_t run = 0;
  for (uint64_t w = 0; w < l.pool_words(); ++w) {
    uint64_t used = pool.Word(w);
    if (used == ~0ull) {
      run = 0;
      continue;
    }
    if (used == 0 && w * 64 + 64 <= l.pages) {
      run += 64;
      if (run >= n) return w * 64 + 64 - run;
      continue;
    }
    for (uint64_t b = 0; b < 64 && w * 64 + b < l.pages; ++b) {
      if ((used >> b) & 1) {
        run = 0;
      } else if (++run >= n) {
        return w * 64 + b + 1 - run;
      }
    }
  }
  return std::nullopt;
}

// Claims `n` contiguous free pages; nullopt if the pool has no such run.
absl::StatusOr<std::optional<uint64_t>> ClaimPages(Context& ctx, const Layout& l, uint64_t n,
                                                   bool from_top) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Snapshot pool, ReadPool(ctx, l));
    std::optional<uint64_t> first = FindFreeRun(l, pool, n, from_top);
    if (!first) return std::nullopt;
    ARDMA_ASSIGN_OR_RETURN(bool claimed, ClaimPoolBits(ctx, l, pool, *first, n));
    if (claimed) return first;
  }
  return absl::AbortedError("heap page claims lost too many races");
}

// Takes one free block of slab `page` (class `cls`) as `d` showed it; nullopt if it has none (or
// is no longer such a slab).
absl::StatusOr<std::optional<uint64_t>> TakeBlock(Context& ctx, const Layout& l, uint64_t page,
                                                  int cls, const Descriptor& d) {
  State s = d.state();
  if (s.kind != kSlab || s.cls != cls) return std::nullopt;
  for (int k = 0; k < BitmapWords(cls); ++k) {
    uint64_t w = d.w[1 + k];
    for (int tries = 0; tries < 1000; ++tries) {
      if ((w >> 48) != s.gen) return std::nullopt;  // the page was recycled
      uint64_t bits = w & WordMask(cls, k);
      if (bits == 0) break;
      int b = std::countr_zero(bits);
      ARDMA_ASSIGN_OR_RETURN(
          CasResult cas, ctx.CompareAndSwap(l.DescAddr(page) + 8 * (1 + k), w, w & ~(1ull << b)));
      if (cas.swapped)
        return PageAddr(page) + ((static_cast<uint64_t>(k) * kBitsPerWord + b) << cls);
      w = cas.observed;
    }
  }
  return std::nullopt;
}

bool IsCurrent(const Layout& l, uint64_t page, int cls) {
  return SlotValue(l.slots[cls]) == page + 1;
}

bool SlabEmpty(const Descriptor& d) {
  State s = d.state();
  for (int k = 0; k < BitmapWords(s.cls); ++k) {
    if (d.w[1 + k] != Tagged(s.gen, WordMask(s.cls, k))) return false;
  }
  return true;
}

// Takes every block of an empty slab (so no allocator can use it any more); false if one was
// allocated meanwhile (what was taken is given back).
absl::StatusOr<bool> ClaimWholeSlab(Context& ctx, const Layout& l, uint64_t page,
                                    const Descriptor& d) {
  State s = d.state();
  for (int k = 0; k < BitmapWords(s.cls); ++k) {
    uint64_t full = Tagged(s.gen, WordMask(s.cls, k));
    ARDMA_ASSIGN_OR_RETURN(
        CasResult cas, ctx.CompareAndSwap(l.DescAddr(page) + 8 * (1 + k), full, Tagged(s.gen, 0)));
    if (!cas.swapped) {
      for (int j = 0; j < k; ++j) {
        ARDMA_RETURN_IF_ERROR(
            ctx.FetchAdd(l.DescAddr(page) + 8 * (1 + j), WordMask(s.cls, j)).status());
      }
      return false;
    }
  }
  return true;
}

Descriptor FreshSlab(int cls, uint64_t gen) {
  Descriptor d{};
  d.w[0] = PackState(kSlab, cls, gen, 0);
  for (int k = 0; k < BitmapWords(cls); ++k) d.w[1 + k] = Tagged(gen, WordMask(cls, k));
  return d;
}

// Empty slabs (not the current slab of their class) go back to the pool. Returns how many.
absl::StatusOr<uint64_t> ReleaseEmptySlabs(Context& ctx, const Layout& l) {
  uint64_t released = 0;
  ARDMA_RETURN_IF_ERROR(
      ScanDescriptors(ctx, l, [&](uint64_t page, const Descriptor& d) -> absl::StatusOr<bool> {
        State s = d.state();
        if (s.kind != kSlab || IsCurrent(l, page, s.cls) || !SlabEmpty(d)) return false;
        ARDMA_ASSIGN_OR_RETURN(bool claimed, ClaimWholeSlab(ctx, l, page, d));
        if (!claimed) return false;
        Descriptor freed{};
        freed.w[0] = PackState(kFree, 0, s.gen, 0);
        ARDMA_RETURN_IF_ERROR(ctx.Write(l.DescAddr(page), EncodeDescriptors({freed})));
        ARDMA_RETURN_IF_ERROR(ReleasePoolBits(ctx, l, page, 1));
        ++released;
        return false;
      }).status());
  return released;
}

// Where this process's next search for a slab with free blocks of a class (and for an empty slab)
// begins: after the page the last one found. Only a starting point: a scan still visits every page
// (from here round to here), so a hint from another heap or a stale one costs nothing but reads.
// Without it every search began at page 0 and, once the pool was used up, walked past the same
// slabs it had already drained: a full table's worth of descriptors read per refill.
std::atomic<uint64_t> partial_hint[kMaxSmallClass + 1];
std::atomic<uint64_t> empty_hint;

// Gives class `cls` a slab with free blocks, installing it as the class's current slab if that is
// still `observed_slot`. False if there is no memory for one.
absl::StatusOr<bool> Refill(Context& ctx, const Layout& l, int cls, uint64_t observed_slot) {
  std::optional<uint64_t> page;
  uint64_t gen = 0;
  ARDMA_ASSIGN_OR_RETURN(page, ClaimPages(ctx, l, 1, /*from_top=*/true));
  if (page) {
    ARDMA_ASSIGN_OR_RETURN(Descriptor old, ReadDescriptor(ctx, l, *page));
    gen = old.state().gen + 1;
  } else {
    // No free page: a slab of this class with free blocks, else an empty slab of another class.
    ARDMA_ASSIGN_OR_RETURN(
        std::optional<uint64_t> partial,
        ScanDescriptors(ctx, l, [&](uint64_t p, const Descriptor& d) -> absl::StatusOr<bool> {
          State s = d.state();
          if (s.kind != kSlab || s.cls != cls || IsCurrent(l, p, cls)) return false;
          for (int k = 0; k < BitmapWords(cls); ++k) {
            if ((d.w[1 + k] >> 48) == s.gen && (d.w[1 + k] & WordMask(cls, k)) != 0) return true;
          }
          return false;
        }, partial_hint[cls].load(std::memory_order_relaxed)));
    if (partial) {
      partial_hint[cls].store(*partial + 1, std::memory_order_relaxed);
      ARDMA_RETURN_IF_ERROR(
          ctx.CompareAndSwap(kClassSlots + 8 * cls, observed_slot, EncodeSlot(*partial + 1))
              .status());
      return true;
    }
    ARDMA_ASSIGN_OR_RETURN(
        page, ScanDescriptors(ctx, l, [&](uint64_t p, const Descriptor& d) -> absl::StatusOr<bool> {
          State s = d.state();
          if (s.kind != kSlab || IsCurrent(l, p, s.cls) || !SlabEmpty(d)) return false;
          ARDMA_ASSIGN_OR_RETURN(bool claimed, ClaimWholeSlab(ctx, l, p, d));
          if (claimed) gen = s.gen + 1;
          return claimed;
        }, empty_hint.load(std::memory_order_relaxed)));
    if (!page) return false;
    empty_hint.store(*page + 1, std::memory_order_relaxed);
  }
  ARDMA_RETURN_IF_ERROR(ctx.Write(l.DescAddr(*page), EncodeDescriptors({FreshSlab(cls, gen)})));
  // If another slab was installed meanwhile, this one is found by a later scan.
  ARDMA_RETURN_IF_ERROR(
      ctx.CompareAndSwap(kClassSlots + 8 * cls, observed_slot, EncodeSlot(*page + 1)).status());
  return true;
}

absl::StatusOr<uint64_t> AllocateSmall(Context& ctx, int cls, uint64_t size) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Layout l, ReadLayout(ctx));
    const uint64_t slot = l.slots[cls];  // as read: what Refill's CAS expects
    const uint64_t current = SlotValue(slot);
    if (current != 0 && current <= l.pages) {
      ARDMA_ASSIGN_OR_RETURN(Descriptor d, ReadDescriptor(ctx, l, current - 1));
      ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> block, TakeBlock(ctx, l, current - 1, cls, d));
      if (block) return *block;
    }
    ARDMA_ASSIGN_OR_RETURN(bool refilled, Refill(ctx, l, cls, slot));
    if (!refilled) {
      return absl::ResourceExhaustedError(
          absl::StrCat("heap full: cannot allocate ", size, " bytes"));
    }
  }
  return absl::AbortedError("heap allocation lost too many races");
}

absl::StatusOr<uint64_t> AllocateRun(Context& ctx, uint64_t size) {
  uint64_t n = (size + kPageSize - 1) / kPageSize;
  for (int attempt = 0; attempt < 100; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Layout l, ReadLayout(ctx));
    if (n > l.pages) break;
    ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> first, ClaimPages(ctx, l, n, false));
    if (!first) {
      // Give empty slabs back to the pool and look again; nothing to give back: the heap is full.
      ARDMA_ASSIGN_OR_RETURN(uint64_t released, ReleaseEmptySlabs(ctx, l));
      if (released == 0) break;
      continue;
    }
    // Only the head is described: the other pages keep the free descriptors they had in the pool
    // (a run's size is in its head, and Check knows the pages it covers).
    // Free(gen) -> RunHead(gen + 1, n) in one step: a page in the pool is described as free with
    // nothing but its generation, so adding the difference is exact.
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(l.DescAddr(*first), PackState(kRunHead, 0, 1, n)).status());
    return PageAddr(*first);
  }
  return absl::ResourceExhaustedError(absl::StrCat("heap full: cannot allocate ", size, " bytes"));
}

// The page and descriptor of a block address, or InvalidArgument.
struct Located {
  Layout layout;
  uint64_t page;
  uint64_t offset;  // within the page
  Descriptor d;
};

absl::StatusOr<Located> Locate(Context& ctx, uint64_t addr) {
  ARDMA_ASSIGN_OR_RETURN(Layout l, ReadLayout(ctx));
  if (addr < kDataStart || addr % 16 != 0 || (addr - kDataStart) / kPageSize >= l.pages) {
    return absl::InvalidArgumentError(absl::StrCat(addr, " is not a heap block"));
  }
  Located at{l, (addr - kDataStart) / kPageSize, (addr - kDataStart) % kPageSize, {}};
  ARDMA_ASSIGN_OR_RETURN(at.d, ReadDescriptor(ctx, l, at.page));
  return at;
}

absl::Status NotABlock(uint64_t addr) {
  return absl::InvalidArgumentError(absl::StrCat(addr, " is not the start of a heap block"));
}

}  // namespace

int SizeClass(uint64_t size) {
  int cls = size <= 1 ? 0 : std::bit_width(size - 1);
  return cls < kMinClass ? kMinClass : cls;
}

uint64_t CapacityFor(uint64_t size) {
  int cls = SizeClass(size);
  if (cls <= kMaxSmallClass) return 1ull << cls;
  return (size + kPageSize - 1) / kPageSize * kPageSize;
}

double HeapReport::fragmentation() const {
  uint64_t free = free_bytes();
  return free == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free_run) / static_cast<double>(free);
}

absl::StatusOr<bool> FormatIfNeeded(Context& ctx, uint64_t region_size, bool keep_existing) {
  Layout l = ComputeLayout(region_size);
  if (l.pages < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a heap needs at least ", kDataStart + 2 * (kPageSize + kDescriptorSize) + 64, " bytes"));
  }
  ARDMA_ASSIGN_OR_RETURN(Snapshot header, ReadSnapshot(ctx, 0, kDataStart));
  const uint64_t magic = header.Word(0), version = header.Word(1), size = header.Word(2);
  if (magic == kMagic) {
    if (version != kLayoutVersion && version != 2) {
      return absl::FailedPreconditionError(
          absl::StrCat("region holds a heap of layout version ", version,
                       "; this ardmad reads layout version ", kLayoutVersion,
                       " (and upgrades version 2) only (start it on a new memory file, or use the "
                       "ardmad that wrote it)"));
    }
    if (size != region_size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "region holds a heap of ", size, " bytes; this region has ", region_size, " bytes"));
    }
    // Every word is checked before anything is written, so a refusal leaves the file as it was.
    ARDMA_ASSIGN_OR_RETURN(Snapshot directory, ReadSnapshot(ctx, l.dir, l.buckets * 8));
    ARDMA_RETURN_IF_ERROR(internal::ValidateHeader(header.bytes, directory.bytes, region_size,
                                                   /*raw_slots=*/version == 2));
    ARDMA_RETURN_IF_ERROR(internal::CheckDirectory(ctx, l));
    if (version == 2) {
      // Upgrade: slots as checked words, then the version (a crash between is redone: version 2
      // accepts encoded slots).
      for (int c = 0; c < internal::kNumSlots; ++c) {
        uint64_t offset = kClassSlots + 8 * c;
        uint64_t word = header.Word(offset / 8);
        if (!internal::SlotIntact(word)) {
          ARDMA_RETURN_IF_ERROR(
              ctx.CompareAndSwap(offset, word, internal::EncodeSlot(word)).status());
        }
      }
      ARDMA_RETURN_IF_ERROR(ctx.WriteU64(8, kLayoutVersion));
    }
    return false;
  }
  if (keep_existing && magic != kFormattingMagic) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the memory file holds no heap: its header is damaged or it is not an ardmad heap (magic ",
        absl::Hex(magic, absl::kZeroPad16),
        "); refusing to format it, which would erase it. Start with --format to format it anyway"));
  }
  // The formatting mark first, then the metadata (the region may hold anything), then the header,
  // the magic last: a crash mid-format leaves a region marked as never having been a heap.
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(0, kFormattingMagic));
  constexpr uint64_t kChunk = 1 << 20;
  std::string zeros(kChunk, '\0');
  for (uint64_t at = l.pool; at < region_size; at += kChunk) {
    uint64_t n = std::min(kChunk, region_size - at);
    ARDMA_RETURN_IF_ERROR(ctx.Write(at, std::string_view(zeros).substr(0, n)));
  }
  std::string fresh(kDataStart, '\0');
  auto put = [&fresh](uint64_t offset, uint64_t value) { std::memcpy(&fresh[offset], &value, 8); };
  put(0, kFormattingMagic);
  put(8, kLayoutVersion);
  put(16, region_size);
  internal::PutLayout(l, &fresh);
  ARDMA_RETURN_IF_ERROR(ctx.Write(0, fresh));
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(0, kMagic));
  return true;
}

absl::StatusOr<uint64_t> Allocate(Context& ctx, uint64_t size) {
  if (size > (1ull << 46)) return absl::ResourceExhaustedError("allocation too large");
  int cls = SizeClass(size);
  if (cls <= kMaxSmallClass) return AllocateSmall(ctx, cls, size);
  return AllocateRun(ctx, size);
}

absl::StatusOr<uint64_t> BlockCapacity(Context& ctx, uint64_t addr) {
  ARDMA_ASSIGN_OR_RETURN(Located at, Locate(ctx, addr));
  State s = at.d.state();
  switch (s.kind) {
    case kSlab: {
      if (at.offset % (1ull << s.cls) != 0) return NotABlock(addr);
      uint64_t index = at.offset >> s.cls;
      uint64_t w = at.d.w[1 + index / kBitsPerWord];
      if ((w >> (index % kBitsPerWord)) & 1) {
        return absl::FailedPreconditionError(absl::StrCat(addr, " is a freed heap block"));
      }
      return 1ull << s.cls;
    }
    case kRunHead:
      if (at.offset != 0) return NotABlock(addr);
      return s.low * kPageSize;
    case kRunTail:
      return NotABlock(addr);
    case kFree:
      break;
  }
  return absl::FailedPreconditionError(absl::StrCat(addr, " is not allocated (freed?)"));
}

absl::Status Free(Context& ctx, uint64_t addr) {
  ARDMA_ASSIGN_OR_RETURN(Located at, Locate(ctx, addr));
  const Layout& l = at.layout;
  State s = at.d.state();
  switch (s.kind) {
    case kSlab: {
      if (at.offset % (1ull << s.cls) != 0) return NotABlock(addr);
      uint64_t index = at.offset >> s.cls;
      int k = static_cast<int>(index / kBitsPerWord);
      uint64_t bit = 1ull << (index % kBitsPerWord);
      uint64_t w = at.d.w[1 + k];
      for (int tries = 0; tries < kMaxCasRetries; ++tries) {
        if ((w >> 48) != s.gen) return absl::DataLossError("heap slab changed under a free");
        if (w & bit) return absl::FailedPreconditionError(absl::StrCat("double free of ", addr));
        ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                               ctx.CompareAndSwap(l.DescAddr(at.page) + 8 * (1 + k), w, w | bit));
        if (cas.swapped) return absl::OkStatus();
        w = cas.observed;
      }
      return absl::AbortedError("heap free lost too many races");
    }
    case kRunHead: {
      if (at.offset != 0) return NotABlock(addr);
      uint64_t n = s.low;
      ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(l.DescAddr(at.page), at.d.w[0],
                                                               PackState(kFree, 0, s.gen, 0)));
      if (!cas.swapped) return absl::FailedPreconditionError(absl::StrCat("double free of ", addr));
      return ReleasePoolBits(ctx, l, at.page, n);
    }
    case kRunTail:
      return NotABlock(addr);
    case kFree:
      break;
  }
  return absl::FailedPreconditionError(absl::StrCat("free of ", addr, ", which is not allocated"));
}

absl::StatusOr<HeapReport> Check(Context& ctx) {
  ARDMA_ASSIGN_OR_RETURN(Layout l, ReadLayout(ctx));
  ARDMA_ASSIGN_OR_RETURN(Snapshot pool, ReadPool(ctx, l));
  HeapReport r;
  r.data_bytes = l.pages * kPageSize;
  uint64_t free_run = 0, run_end = 0, run_head = 0;
  auto error = [&r](uint64_t page, std::string what) {
    if (r.errors.size() < 100) r.errors.push_back(absl::StrCat("page ", page, ": ", what));
  };
  ARDMA_RETURN_IF_ERROR(
      ScanDescriptors(ctx, l, [&](uint64_t page, const Descriptor& d) -> absl::StatusOr<bool> {
        State s = d.state();
        bool used = PageInUse(pool, page);
        if (s.kind != kFree || used) free_run = 0;
        if (page < run_end) {  // inside a run: its pages keep their free descriptors
          if (s.kind != kFree)
            error(page, absl::StrCat("page of the run at ", run_head, " is described"));
          if (!used) error(page, "run page not in use in the pool");
          return false;
        }
        switch (s.kind) {
          case kFree:
            if (used) {
              r.orphaned_bytes += kPageSize;
            } else {
              r.free_page_bytes += kPageSize;
              free_run += kPageSize;
              r.largest_free_run = std::max(r.largest_free_run, free_run);
            }
            break;
          case kSlab: {
            if (!used) error(page, "slab not in use in the pool");
            if (s.cls < kMinClass || s.cls > kMaxSmallClass) {
              error(page, absl::StrCat("slab of class ", s.cls));
              break;
            }
            ++r.slabs;
            uint64_t free_blocks = 0;
            for (int k = 0; k < BitmapWords(s.cls); ++k) {
              uint64_t w = d.w[1 + k];
              if ((w >> 48) != s.gen) error(page, "bitmap word of another generation");
              if ((w & kBitsMask & ~WordMask(s.cls, k)) != 0) error(page, "bits past the page");
              free_blocks += std::popcount(w & WordMask(s.cls, k));
            }
            uint64_t block = 1ull << s.cls;
            r.slab_free_bytes += free_blocks * block;
            r.slab_live_bytes += (BlocksPerPage(s.cls) - free_blocks) * block;
            r.slab_overhead_bytes += kPageSize - BlocksPerPage(s.cls) * block;
            break;
          }
          case kRunHead:
            if (s.low == 0 || page + s.low > l.pages) {
              error(page, absl::StrCat("run of ", s.low, " pages"));
              break;
            }
            if (!used) error(page, "run page not in use in the pool");
            ++r.runs;
            r.run_live_bytes += s.low * kPageSize;
            run_head = page;
            run_end = page + s.low;
            break;
          case kRunTail:
            error(page, "a run tail (no longer used)");
            break;
        }
        return false;
      }).status());
  uint64_t total = r.free_page_bytes + r.slab_free_bytes + r.slab_live_bytes +
                   r.slab_overhead_bytes + r.run_live_bytes + r.orphaned_bytes;
  if (total != r.data_bytes) {
    r.errors.push_back(absl::StrCat("accounted for ", total, " of ", r.data_bytes, " bytes"));
  }
  return r;
}

}  // namespace ardma::heap
