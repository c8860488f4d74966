#include "core/memory/region_bounds.h"

#include "absl/strings/str_cat.h"

namespace ardma {

absl::Status RegionBounds::OutOfRange(uint64_t addr, uint64_t len) const {
  return absl::OutOfRangeError(absl::StrCat("access of ", len, " bytes at ", addr,
                                            " is outside the region of ", size, " bytes"));
}

absl::Status RegionBounds::ReadOnly() { return absl::PermissionDeniedError("region is read-only"); }

absl::Status RegionBounds::Misaligned(uint64_t addr) {
  return absl::InvalidArgumentError(
      absl::StrCat("atomic access at ", addr, " is not 8-byte aligned"));
}

}  // namespace ardma
