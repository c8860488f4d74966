// The heap's layout (heap.h has the table): where a region of a given size keeps its pages, pool
// bitmap, descriptors and root directory, and the header that records it. Shared by the
// allocator (heap.cc) and the roots (heap_roots.cc); not for use elsewhere.
#ifndef ARDMA_CORE_MEMORY_HEAP_LAYOUT_H_
#define ARDMA_CORE_MEMORY_HEAP_LAYOUT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"

namespace ardma::heap::internal {

// Header fields.
inline constexpr uint64_t kPagesField = 24;
inline constexpr uint64_t kPoolField = 32;
inline constexpr uint64_t kDescField = 40;
inline constexpr uint64_t kDirField = 48;
inline constexpr uint64_t kBucketsField = 56;
inline constexpr uint64_t kClassSlots = 64;
inline constexpr int kNumSlots = 16;
inline constexpr uint64_t kHeaderBytes = kClassSlots + 8 * kNumSlots;

struct Layout {
  uint64_t region_size = 0;
  uint64_t pages = 0;
  uint64_t pool = 0;     // offset of the pool bitmap
  uint64_t desc = 0;     // offset of the descriptors
  uint64_t dir = 0;      // offset of the root directory's buckets
  uint64_t buckets = 0;  // a power of two
  uint64_t slots[kNumSlots] = {};
  uint64_t pool_words() const { return (pages + 63) / 64; }
  uint64_t DescAddr(uint64_t page) const { return desc + page * kDescriptorSize; }
};

// Where everything goes in a region of `size` bytes: as many pages as fit beside their bitmap
// bit, descriptor and the directory (pages == 0 if none fits).
Layout ComputeLayout(uint64_t size);
// Writes the layout's fields and empty class slots into a header image (at least kHeaderBytes).
void PutLayout(const Layout& l, std::string* header);

// Class slots check themselves (layout version 3): the low 40 bits are page + 1 (0: no current
// slab), the high 24 a CRC-24 of those 40 bits, so a damaged byte anywhere in a slot shows.
uint64_t EncodeSlot(uint64_t page_plus_one);
inline uint64_t SlotValue(uint64_t word) { return word & ((uint64_t{1} << 40) - 1); }
inline bool SlotIntact(uint64_t word) { return EncodeSlot(SlotValue(word)) == word; }

// Checks the header of an existing heap of `region_size` bytes — `header` is its first kDataStart
// bytes — and its root directory (`directory`: the B bucket words), before anything is written:
// the magic, every layout word against the layout a heap of this size has, every class slot (its
// check, a page that exists, 0 for classes that have no slabs), the reserved bytes zero, every
// bucket 0 or a block in the data pages. `raw_slots`: slots as layout version 2 wrote them (page +
// 1 unchecked; an encoded one, from an upgrade cut short, is accepted too). FailedPrecondition
// naming the first thing wrong.
absl::Status ValidateHeader(std::string_view header, std::string_view directory,
                            uint64_t region_size, bool raw_slots);
// Walks every chain of the root directory: each entry a block in the data pages, on one chain
// only, a live or deleted entry whose name hashes to its tag and bucket. FailedPrecondition naming
// the bucket otherwise. Reads only (heap_roots.cc).
absl::Status CheckDirectory(Context& ctx, const Layout& l);
// Reads the header (one READ). FailedPrecondition if region 0 holds no heap of this layout.
// with_slots false: the layout words only (what the root directory needs), the slots left zero.
absl::StatusOr<Layout> ReadLayout(Context& ctx, bool with_slots = true);

// Descriptors and bitmaps (heap.h has their layout).
inline constexpr int kBitsPerWord = 48;
inline constexpr uint64_t kBitsMask = (1ull << kBitsPerWord) - 1;
inline constexpr int kDescWords = 8;
// Descriptors are scanned (for slabs with free blocks, or empty ones) in windows that grow from
// kFirstScanPages to kScanPages descriptors (4 KiB to 256 KiB): a scan that stops early reads
// little, and no one READ of a scan is large.
inline constexpr uint64_t kFirstScanPages = 64;
inline constexpr uint64_t kScanPages = 4096;

// (Kind 3 is not written: a run is described by its first page alone.)
enum Kind : uint64_t { kFree = 0, kSlab = 1, kRunHead = 2, kRunTail = 3 };

struct State {
  Kind kind;
  int cls;
  uint64_t gen;  // 16 bits
  uint64_t low;  // 40 bits
};

inline uint64_t PackState(Kind kind, int cls, uint64_t gen, uint64_t low) {
  return static_cast<uint64_t>(kind) << 62 | static_cast<uint64_t>(cls) << 56 |
         (gen & 0xffff) << 40 | (low & ((1ull << 40) - 1));
}

inline State UnpackState(uint64_t w) {
  return {static_cast<Kind>(w >> 62), static_cast<int>((w >> 56) & 63), (w >> 40) & 0xffff,
          w & ((1ull << 40) - 1)};
}

inline uint64_t BlocksPerPage(int cls) { return kPageSize >> cls; }
inline int BitmapWords(int cls) {
  return static_cast<int>((BlocksPerPage(cls) + kBitsPerWord - 1) / kBitsPerWord);
}
// The bits of bitmap word k that stand for blocks of the page.
inline uint64_t WordMask(int cls, int k) {
  uint64_t n = std::min<uint64_t>(kBitsPerWord, BlocksPerPage(cls) - kBitsPerWord * k);
  return n == kBitsPerWord ? kBitsMask : (1ull << n) - 1;
}
inline uint64_t Tagged(uint64_t gen, uint64_t bits) { return (gen & 0xffff) << 48 | bits; }

inline uint64_t PageAddr(uint64_t page) { return kDataStart + page * kPageSize; }

struct Descriptor {
  uint64_t w[kDescWords];
  State state() const { return UnpackState(w[0]); }
};

inline absl::StatusOr<Descriptor> ReadDescriptor(Context& ctx, const Layout& l, uint64_t page) {
  Descriptor d;
  ARDMA_RETURN_IF_ERROR(
      ctx.Read(l.DescAddr(page), std::span<char>(reinterpret_cast<char*>(d.w), sizeof(d.w))));
  return d;
}

inline std::string EncodeDescriptors(const std::vector<Descriptor>& ds) {
  std::string out(ds.size() * kDescriptorSize, '\0');
  for (size_t i = 0; i < ds.size(); ++i) std::memcpy(&out[i * kDescriptorSize], ds[i].w, 64);
  return out;
}

// Bytes of the heap's metadata as one read saw them: a view where memory is local (no copy).
struct Snapshot {
  std::string copy;
  std::string_view bytes;
  uint64_t Word(uint64_t i) const {
    uint64_t v;
    std::memcpy(&v, bytes.data() + 8 * i, 8);
    return v;
  }
};

inline absl::StatusOr<Snapshot> ReadSnapshot(Context& ctx, uint64_t addr, uint64_t len) {
  Snapshot s;
  if (ctx.IsLocal()) {
    ARDMA_ASSIGN_OR_RETURN(s.bytes, ctx.View(addr, len));
  } else {
    ARDMA_ASSIGN_OR_RETURN(s.copy, ctx.Read(addr, len));
    s.bytes = s.copy;
  }
  return s;
}

inline absl::StatusOr<Snapshot> ReadPool(Context& ctx, const Layout& l) {
  return ReadSnapshot(ctx, l.pool, l.pool_words() * 8);
}

inline bool PageInUse(const Snapshot& pool, uint64_t page) {
  return (pool.Word(page / 64) >> (page % 64)) & 1;
}

// Calls `visit(page, descriptor)` for every page's descriptor once, from page `start` to the last
// and then from page 0 (in page order when `start` is 0), reading them in growing windows; stops
// early when `visit` returns true and returns that page. A scan that begins where the last one
// of its kind ended usually stops in its first window.
template <typename Visit>
absl::StatusOr<std::optional<uint64_t>> ScanDescriptors(Context& ctx, const Layout& l, Visit visit,
                                                        uint64_t start = 0) {
  if (l.pages == 0) return std::nullopt;
  start %= l.pages;
  uint64_t window = kFirstScanPages;
  for (uint64_t done = 0; done < l.pages; window = std::min(window * 4, kScanPages)) {
    uint64_t first = (start + done) % l.pages;
    uint64_t n = std::min({window, l.pages - done, l.pages - first});
    ARDMA_ASSIGN_OR_RETURN(Snapshot chunk,
                           ReadSnapshot(ctx, l.DescAddr(first), n * kDescriptorSize));
    for (uint64_t i = 0; i < n; ++i) {
      Descriptor d;
      std::memcpy(d.w, chunk.bytes.data() + i * kDescriptorSize, sizeof(d.w));
      ARDMA_ASSIGN_OR_RETURN(bool stop, visit(first + i, d));
      if (stop) return first + i;
    }
    done += n;
  }
  return std::nullopt;
}

}  // namespace ardma::heap::internal

#endif  // ARDMA_CORE_MEMORY_HEAP_LAYOUT_H_
