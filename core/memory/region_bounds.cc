#include "core/memory/region_bounds.h"

#include "absl/strings/str_cat.h"

namespace ardma {

absl::Status RegionBounds::CheckRange(uint64_t addr, uint64_t len) const {
  if (addr > size || len > size - addr) {
    return absl::OutOfRangeError(absl::StrCat("access of ", len, " bytes at ", addr,
                                              " is outside the region of ", size, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status RegionBounds::CheckWritable(uint64_t addr, uint64_t len) const {
  if (read_only) return absl::PermissionDeniedError("region is read-only");
  return CheckRange(addr, len);
}

absl::Status RegionBounds::CheckAtomic(uint64_t addr) const {
  if (addr % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("atomic access at ", addr, " is not 8-byte aligned"));
  }
  return CheckWritable(addr, 8);
}

}  // namespace ardma
