// The heap's own metadata, kept inside region 0 and written once against Context, so an RDMA-mode
// client (every step a round trip, races settled with CAS) and active code on the server (every
// step a local access) allocate and name things with one set of metadata.
//
// Layout version 3. Region 0 (all words little-endian u64):
//
//   offset        size         field
//   0             8            magic "ARDMAHP1"
//   8             8            layout version (3; a version-2 heap is upgraded when opened)
//   16            8            region size in bytes
//   24            8            data pages N
//   32            8            pool bitmap offset P
//   40            8            descriptor table offset D
//   48            8            root directory offset R
//   56            8            root directory buckets B (a power of two, 1,024 to 2^20, one per
//                              64 KiB of region)
//   64            8 * 16       current slab of size class c (4 <= c <= 11): crc24:24 << 40 |
//                              page index + 1 (0: none), the CRC-24 of the low 40 bits (version 2:
//                              page index + 1 alone); classes without slabs hold the encoded 0
//   192           16192        reserved (0)
//
// Words 16-63 are fixed by the region's size (ComputeLayout), the slots check themselves, the
// reserved bytes are zero and every directory bucket points into the data pages: an existing heap
// is checked for all of that before anything is written, and refused with what is wrong.
//   16384         4096 * N     data pages (kDataStart: page i at kDataStart + 4096 i)
//   P             8 * ceil(N/64)  page pool bitmap: bit i set = page i is in use
//   D             64 * N       page descriptors, one per data page:
//                                word 0   state: kind:2 << 62 | class:6 << 56 | gen:16 << 40 |
//                                         low:40 (run head: its pages)
//                                         kind 0 free, 1 slab, 2 run head (a run's other pages
//                                         keep the free descriptor they had in the pool)
//                                words 1-6  slab bitmap, 48 blocks a word: gen:16 << 48 |
//                                         bits:48, a set bit is a free block
//                                word 7   reserved (0)
//   R             8 * B        root directory: bucket b holds the first entry of the chain of
//                              names whose FNV-1a hash is b modulo B (0: none). An entry is a heap
//                              block: next:u64, state:u64 (tag48(hash) << 16 | 2 live, 3 deleted),
//                              value:u64, name length:u64, name (1 to 255 bytes, no NUL)
//
// Small allocations (up to 2 KiB) come from slabs: a page cut into blocks of one power-of-two
// class, 16 B to 2 KiB, with no per-block header. Allocating is three steps, three round trips for
// an RDMA-mode client: read the header (with the class's current slab), read that slab's
// descriptor, clear one free bit with a CAS. Freeing reads the descriptor and sets the bit with a
// CAS (a set bit is a double free). The gen field in every bitmap word ties it to one use of the
// page as a slab, so a CAS prepared from a stale read of a page since recycled fails.
// Larger allocations are runs of whole pages found in the pool bitmap (first fit from the bottom;
// new slab pages are taken from the top, so small and large allocations do not interleave), claimed
// with a CAS per bitmap word, then described in their first page's descriptor.
//
// Free memory serves any size: an empty slab is returned to the pool (or re-cut for another class)
// when the pool cannot satisfy a request, and a slab with free blocks is found again by a scan of
// the descriptors when its class needs a page and the pool has none (begun where this process's
// last such scan ended, read in windows of 4 KiB growing to 256 KiB: a refill reads a few KiB,
// not the table). Fresh pages go first, so under churn the region's pages all become resident
// before freed blocks are reused. Fragmentation that remains:
//   - inside blocks: a block is the next power of two (up to 2x the size asked); a run is whole
//     pages (under 4 KiB lost per run);
//   - slabs: a page with one live block holds its 4 KiB; with live small blocks at fraction f of
//     their slabs' capacity, small data uses up to 1/f of its size;
//   - pages: a run needs contiguous free pages; live runs and slabs can split the free pages so
//     that a large run fails while the sum of free pages would hold it (no allocator that never
//     moves data can rule this out). `Check` reports the largest free run.
// Crash safety: every step that publishes an allocation or a free is a single CAS. A client that
// dies between steps can leave pages claimed in the pool that no descriptor owns yet ("orphaned",
// reported by Check) or blocks allocated that nobody will free; it never leaves a block owned
// twice.
//
// All functions are safe to call concurrently from any number of clients and active functions.
#ifndef ARDMA_CORE_MEMORY_HEAP_H_
#define ARDMA_CORE_MEMORY_HEAP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/context/context.h"

namespace ardma::heap {

inline constexpr uint64_t kMagic = 0x3150484D41445241ull;  // "ARDMAHP1"
inline constexpr uint64_t kLayoutVersion = 3;
// In the magic's place while a format is under way: a region that shows it was never a heap.
inline constexpr uint64_t kFormattingMagic = 0x474E4954414D524Full;  // "ORMATING"
inline constexpr size_t kMaxRootName = 255;
inline constexpr uint64_t kDataStart = 16384;
inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kDescriptorSize = 64;
inline constexpr int kMinClass = 4;        // 16-byte blocks
inline constexpr int kMaxSmallClass = 11;  // 2 KiB blocks; larger allocations are page runs
// Blocks carry no header (kept for code that computes a class's capacity as 2^c - header).
inline constexpr uint64_t kBlockHeader = 0;

// Writes a fresh heap unless the region already holds one. Returns true if it formatted.
// FailedPrecondition if the region holds a heap of another layout version or size, and — when
// `keep_existing` (an existing memory file) — if its header is not a heap's at all (damaged, or
// another file): formatting would erase it. A format interrupted by a crash may be redone.
absl::StatusOr<bool> FormatIfNeeded(Context& ctx, uint64_t region_size, bool keep_existing = false);

// The class c of `size`: Allocate(size) returns a block of at least `size` and at most 2^c bytes.
int SizeClass(uint64_t size);

// The capacity Allocate(size) gives: 2^SizeClass(size) up to 2 KiB, else whole 4 KiB pages.
uint64_t CapacityFor(uint64_t size);

// Allocates `size` payload bytes; returns the address (16-byte aligned, page-aligned above 2 KiB,
// not zeroed). ResourceExhausted when no free memory can hold it.
absl::StatusOr<uint64_t> Allocate(Context& ctx, uint64_t size);
// Frees a block returned by Allocate. InvalidArgument for an address that is not an allocated
// block's start; FailedPrecondition for a double free.
absl::Status Free(Context& ctx, uint64_t addr);
// The capacity of an allocated block (at least the size asked for). InvalidArgument for an
// address that is no block's start; FailedPrecondition for a freed block.
absl::StatusOr<uint64_t> BlockCapacity(Context& ctx, uint64_t addr);

// What a walk of every piece of metadata found: each data byte is in exactly one category.
struct HeapReport {
  uint64_t data_bytes = 0;           // N pages
  uint64_t free_page_bytes = 0;      // pages in the pool, free
  uint64_t slab_free_bytes = 0;      // free blocks in slabs
  uint64_t slab_live_bytes = 0;      // allocated blocks (capacity)
  uint64_t slab_overhead_bytes = 0;  // slab tails too small for a block
  uint64_t run_live_bytes = 0;       // allocated page runs
  uint64_t orphaned_bytes = 0;       // pages claimed in the pool that no descriptor owns
  uint64_t largest_free_run = 0;     // bytes, contiguous free pages
  uint64_t slabs = 0, runs = 0;
  std::vector<std::string> errors;  // inconsistencies; empty for a sound heap
  uint64_t live_bytes() const { return slab_live_bytes + run_live_bytes; }
  uint64_t free_bytes() const { return free_page_bytes + slab_free_bytes; }
  // 1 - largest free run / free bytes: 0 when all free memory is one run.
  double fragmentation() const;
};
// Walks the pool bitmap and every descriptor (for an RDMA-mode client: a few large READs). Meant
// for statistics and for checking; concurrent changes can show as transient errors.
absl::StatusOr<HeapReport> Check(Context& ctx);

// Named roots: the well-known entry points of data structures ("dht", "list:todo", ...); as many
// as memory holds. A root is created whole (its entry is written, then linked with one CAS), so a
// creator that dies leaves no half-made root. Deleting a root marks its entry deleted (the 32 +
// name-length bytes of the entry stay in its chain; the name can be created again).
absl::StatusOr<uint64_t> GetRoot(Context& ctx, std::string_view name);  // NotFound
// GetRoot for a root that may well not exist: none is an answer, not an error (no status built).
absl::StatusOr<std::optional<uint64_t>> FindRoot(Context& ctx, std::string_view name);
// Returns the root's value, creating it with `initial` if it does not exist yet. When several
// callers race, exactly one creates it and all return the same value.
absl::StatusOr<uint64_t> GetOrCreateRoot(Context& ctx, std::string_view name, uint64_t initial);
// Atomically replaces the value if it equals `expected`. NotFound if there is no such root.
absl::StatusOr<CasResult> CompareAndSetRoot(Context& ctx, std::string_view name, uint64_t expected,
                                            uint64_t desired);
// Deletes the root (not what its value points to). NotFound if there is no such root.
absl::Status DeleteRoot(Context& ctx, std::string_view name);

// The names of the live roots that start with `prefix`, in no particular order. A walk of the
// whole directory (for an RDMA-mode client: one READ of the bucket array, then one per entry):
// for administration (a cluster member's tables), not for the fast path.
absl::StatusOr<std::vector<std::string>> ListRoots(Context& ctx, std::string_view prefix);

// The address of the root's value word (8-byte aligned, fixed for the root's life), for CAS and
// FETCH_ADD on it directly.
absl::StatusOr<uint64_t> RootValueAddress(Context& ctx, std::string_view name);

}  // namespace ardma::heap

#endif  // ARDMA_CORE_MEMORY_HEAP_H_
