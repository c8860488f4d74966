// The heap's layout (heap.h has the table): where a region of a given size keeps its pages, pool
// bitmap, descriptors and root directory, and the header that records it. Shared by the
// allocator (heap.cc) and the roots (heap_roots.cc); not for use elsewhere.
#ifndef ARDMA_CORE_MEMORY_HEAP_LAYOUT_H_
#define ARDMA_CORE_MEMORY_HEAP_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "core/memory/heap.h"

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
// Writes the layout's fields into a header image (at least kHeaderBytes long).
void PutLayout(const Layout& l, std::string* header);
// Reads the header (one READ). FailedPrecondition if region 0 holds no heap of this layout.
absl::StatusOr<Layout> ReadLayout(Context& ctx);

}  // namespace ardma::heap::internal

#endif  // ARDMA_CORE_MEMORY_HEAP_LAYOUT_H_
