// The heap's own metadata, kept inside region 0 and written once against Context, so an RDMA-mode
// client (every step a round trip, races settled with CAS) and active code on the server (every
// step a local access) allocate and name things with one set of metadata.
//
// Layout of region 0 (all words little-endian u64):
//
//   offset  size        field
//   0       8           magic "ARDMAHP1"
//   8       8           layout version (1)
//   16      8           region size in bytes
//   24      8           bump: first never-allocated byte (advanced with FETCH_ADD)
//   32      8           bytes currently allocated (FETCH_ADD on allocate/free; statistics)
//   64      8 * 48      free-list heads, one per size class c (blocks of 2^c bytes):
//                       tag:u16 << 48 | (block offset / 16); tag counts every push and pop (ABA)
//   4096    64 * 128    named roots, probed linearly from hash(name) % 128; each 64 bytes:
//                         state:u64  0 empty | hash48(name) << 16 | phase (1 claiming, 2 ready)
//                         value:u64
//                         name:char[48] (NUL-padded; at most 47 bytes)
//   16384   ...         blocks
//
//   block := class:u64 mark:u64 payload        ; payload address is what Allocate returns
//   mark is "ALLOCATD" while allocated and "FREEBLK!" while free (a CAS between the two catches a
//   double free); a free block's first payload word links to the next free block of its class.
//
// Allocation rounds the block (16-byte header + size) up to a power of two (minimum 32 bytes); a
// freed block goes on its class's free list, a Treiber stack with a tagged head. Payloads are
// 16-byte aligned and not zeroed. Roots are never deleted; their values can be changed.
//
// All functions are safe to call concurrently from any number of clients and active functions.
#ifndef ARDMA_CORE_MEMORY_HEAP_H_
#define ARDMA_CORE_MEMORY_HEAP_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/context/context.h"

namespace ardma::heap {

inline constexpr uint64_t kMagic = 0x3150484D41445241ull;  // "ARDMAHP1"
inline constexpr uint64_t kLayoutVersion = 1;
inline constexpr uint64_t kBumpOffset = 24;
inline constexpr uint64_t kAllocatedBytesOffset = 32;
inline constexpr uint64_t kFreeListOffset = 64;
inline constexpr int kNumClasses = 48;
inline constexpr uint64_t kRootsOffset = 4096;
inline constexpr int kNumRoots = 128;
inline constexpr uint64_t kRootSize = 64;
inline constexpr size_t kMaxRootName = 47;
inline constexpr uint64_t kDataStart = 16384;
inline constexpr uint64_t kBlockHeader = 16;

// Writes a fresh header unless the region already holds one. Returns true if it formatted.
// FailedPrecondition if the region holds a heap of another layout or size.
absl::StatusOr<bool> FormatIfNeeded(Context& ctx, uint64_t region_size);

// The class c of the block Allocate(size) returns: the block is 2^c bytes, its payload 2^c - 16.
int SizeClass(uint64_t size);

// Allocates `size` payload bytes; returns the payload address (16-byte aligned, not zeroed).
// ResourceExhausted when the region is full.
absl::StatusOr<uint64_t> Allocate(Context& ctx, uint64_t size);
// Frees a block returned by Allocate. InvalidArgument for an address that is not an allocated
// block's payload; FailedPrecondition for a double free.
absl::Status Free(Context& ctx, uint64_t addr);
// The payload capacity of an allocated block (at least the size asked for). InvalidArgument for an
// address that is no block's payload; FailedPrecondition for a freed block.
absl::StatusOr<uint64_t> BlockCapacity(Context& ctx, uint64_t addr);

// Named roots: the well-known entry points of data structures ("dht", "lock", ...). A root being
// created by someone else is waited for; if it stays unpublished for about a second (its creator
// died between claiming and publishing it) these fail with UNAVAILABLE.
absl::StatusOr<uint64_t> GetRoot(Context& ctx, std::string_view name);  // NotFound
// Returns the root's value, creating it with `initial` if it does not exist yet. When several
// callers race, exactly one creates it and all return the same value.
absl::StatusOr<uint64_t> GetOrCreateRoot(Context& ctx, std::string_view name, uint64_t initial);
// Atomically replaces the value if it equals `expected`. NotFound if there is no such root.
absl::StatusOr<CasResult> CompareAndSetRoot(Context& ctx, std::string_view name, uint64_t expected,
                                            uint64_t desired);

// The address of the root's value word (8-byte aligned), for CAS/FETCH_ADD on it directly.
absl::StatusOr<uint64_t> RootValueAddress(Context& ctx, std::string_view name);

}  // namespace ardma::heap

#endif  // ARDMA_CORE_MEMORY_HEAP_H_
