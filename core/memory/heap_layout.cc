#include "core/memory/heap_layout.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <span>

#include "core/status_macros.h"

namespace ardma::heap::internal {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The directory's buckets: one per 64 KiB of region, 1,024 to 1,048,576, a power of two.
uint64_t BucketsFor(uint64_t size) {
  uint64_t b = std::bit_floor(std::max<uint64_t>(size >> 16, 1));
  return std::clamp<uint64_t>(b, 1024, 1 << 20);
}

}  // namespace

Layout ComputeLayout(uint64_t size) {
  Layout l;
  l.region_size = size;
  l.buckets = BucketsFor(size);
  auto place = [&l](uint64_t pages) {
    l.pages = pages;
    l.pool = kDataStart + pages * kPageSize;
    l.desc = AlignUp(l.pool + l.pool_words() * 8, kDescriptorSize);
    l.dir = l.desc + pages * kDescriptorSize;
    return l.dir + l.buckets * 8;  // the end
  };
  uint64_t fixed = kDataStart + kDescriptorSize + l.buckets * 8;
  uint64_t n = size > fixed ? (size - fixed) * 8 / (8 * (kPageSize + kDescriptorSize) + 1) : 0;
  while (n > 0 && place(n) > size) --n;
  if (n == 0) place(0);
  return l;
}

void PutLayout(const Layout& l, std::string* header) {
  auto put = [header](uint64_t offset, uint64_t value) {
    std::memcpy(header->data() + offset, &value, 8);
  };
  put(16, l.region_size);
  put(kPagesField, l.pages);
  put(kPoolField, l.pool);
  put(kDescField, l.desc);
  put(kDirField, l.dir);
  put(kBucketsField, l.buckets);
}

absl::StatusOr<Layout> ReadLayout(Context& ctx) {
  char copy[kHeaderBytes];
  const char* h = copy;
  if (ctx.IsLocal()) {  // on the server: read in place
    ARDMA_ASSIGN_OR_RETURN(std::string_view view, ctx.View(0, kHeaderBytes));
    h = view.data();
  } else {
    ARDMA_RETURN_IF_ERROR(ctx.Read(0, std::span<char>(copy, sizeof(copy))));
  }
  auto at = [h](uint64_t offset) {
    uint64_t v;
    std::memcpy(&v, h + offset, 8);
    return v;
  };
  if (at(0) != kMagic || at(8) != kLayoutVersion) {
    return absl::FailedPreconditionError("region 0 holds no heap of this layout");
  }
  Layout l;
  l.region_size = at(16);
  l.pages = at(kPagesField);
  l.pool = at(kPoolField);
  l.desc = at(kDescField);
  l.dir = at(kDirField);
  l.buckets = at(kBucketsField);
  for (int c = 0; c < kNumSlots; ++c) l.slots[c] = at(kClassSlots + 8 * c);
  return l;
}

}  // namespace ardma::heap::internal
