#include "core/memory/heap_layout.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
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

uint64_t EncodeSlot(uint64_t page_plus_one) {
  // CRC-24 (the OpenPGP polynomial, nonzero start): it catches every error burst of up to 24
  // bits, so any one damaged byte of the 40-bit value.
  uint32_t crc = 0xB704CE;
  for (int i = 0; i < 5; ++i) {
    crc ^= static_cast<uint32_t>((page_plus_one >> (8 * i)) & 0xff) << 16;
    for (int b = 0; b < 8; ++b) {
      crc <<= 1;
      if (crc & 0x1000000) crc ^= 0x1864CFB;
    }
  }
  return static_cast<uint64_t>(crc & 0xffffff) << 40 | SlotValue(page_plus_one);
}

namespace {

uint64_t WordAt(std::string_view bytes, uint64_t offset) {
  uint64_t v;
  std::memcpy(&v, bytes.data() + offset, 8);
  return v;
}

absl::Status Damaged(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the heap's header is damaged: ", what,
      "; refusing to start on it (nothing was written). Restore the file from a copy, or start "
      "with --format to erase it"));
}

}  // namespace

absl::Status ValidateHeader(std::string_view header, std::string_view directory,
                            uint64_t region_size, bool raw_slots) {
  if (header.size() < kDataStart) return Damaged("it is shorter than a header");
  const Layout want = ComputeLayout(region_size);
  struct Field {
    uint64_t offset;
    const char* name;
    uint64_t value;
  };
  const Field fields[] = {
      {16, "region size", region_size},
      {kPagesField, "data pages", want.pages},
      {kPoolField, "pool offset", want.pool},
      {kDescField, "descriptor table offset", want.desc},
      {kDirField, "root directory offset", want.dir},
      {kBucketsField, "root directory buckets", want.buckets},
  };
  for (const Field& f : fields) {
    uint64_t got = WordAt(header, f.offset);
    if (got != f.value) {
      return Damaged(absl::StrCat("header word '", f.name, "' (offset ", f.offset, ") is ", got,
                                  " where a heap of ", region_size, " bytes has ", f.value));
    }
  }
  for (int c = 0; c < kNumSlots; ++c) {
    uint64_t offset = kClassSlots + 8 * c;
    uint64_t word = WordAt(header, offset);
    bool intact = SlotIntact(word) || (raw_slots && word == SlotValue(word));
    uint64_t page_plus_one = SlotValue(word);
    bool has_slabs = c >= kMinClass && c <= kMaxSmallClass;
    if (!intact || page_plus_one > want.pages || (!has_slabs && page_plus_one != 0)) {
      return Damaged(absl::StrCat("the current slab of size class ", c, " (offset ", offset,
                                  ") reads ", absl::Hex(word, absl::kZeroPad16),
                                  intact ? ", no slab of this heap" : ", which fails its check"));
    }
  }
  for (uint64_t at = kHeaderBytes; at < kDataStart; at += 8) {
    if (WordAt(header, at) != 0) {
      return Damaged(absl::StrCat("reserved header bytes at offset ", at, " are not zero"));
    }
  }
  if (directory.size() != want.buckets * 8) return Damaged("the root directory is cut short");
  const uint64_t data_end = kDataStart + want.pages * kPageSize;
  for (uint64_t b = 0; b < want.buckets; ++b) {
    uint64_t entry = WordAt(directory, 8 * b);
    if (entry != 0 && (entry < kDataStart || entry >= data_end || entry % 16 != 0)) {
      return Damaged(absl::StrCat("root directory bucket ", b, " (offset ", want.dir + 8 * b,
                                  ") points to ", entry, ", outside the data pages"));
    }
  }
  return absl::OkStatus();
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
  for (int c = 0; c < kNumSlots; ++c) put(kClassSlots + 8 * c, EncodeSlot(0));
}

absl::StatusOr<Layout> ReadLayout(Context& ctx, bool with_slots) {
  char copy[kHeaderBytes];
  const char* h = copy;
  const uint64_t bytes = with_slots ? kHeaderBytes : kClassSlots;
  if (ctx.IsLocal()) {  // on the server: read in place
    ARDMA_ASSIGN_OR_RETURN(std::string_view view, ctx.View(0, bytes));
    h = view.data();
  } else {
    ARDMA_RETURN_IF_ERROR(ctx.Read(0, std::span<char>(copy, bytes)));
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
  if (with_slots) {
    for (int c = 0; c < kNumSlots; ++c) l.slots[c] = at(kClassSlots + 8 * c);
  }
  return l;
}

}  // namespace ardma::heap::internal
