// RegionBounds: the access rules of a region — its size and whether clients may change it — as
// the server's Region and a client's one-sided transport (UCX) both check them, so an access
// refused locally by a client fails exactly as the server would have refused it.
#ifndef ARDMA_CORE_MEMORY_REGION_BOUNDS_H_
#define ARDMA_CORE_MEMORY_REGION_BOUNDS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace ardma {

struct RegionBounds {
  uint64_t size = 0;
  bool read_only = false;

  // OutOfRange unless [addr, addr + len) lies inside the region.
  absl::Status CheckRange(uint64_t addr, uint64_t len) const {
    if (addr > size || len > size - addr) [[unlikely]] return OutOfRange(addr, len);
    return absl::OkStatus();
  }
  // PermissionDenied for a read-only region, then CheckRange.
  absl::Status CheckWritable(uint64_t addr, uint64_t len) const {
    if (read_only) [[unlikely]] return ReadOnly();
    return CheckRange(addr, len);
  }
  // InvalidArgument unless 8-byte aligned, then CheckWritable(addr, 8).
  absl::Status CheckAtomic(uint64_t addr) const {
    if (addr % 8 != 0) [[unlikely]] return Misaligned(addr);
    return CheckWritable(addr, 8);
  }

 private:
  // The refusals, built out of line: the checks above sit on every access's path.
  absl::Status OutOfRange(uint64_t addr, uint64_t len) const;
  static absl::Status ReadOnly();
  static absl::Status Misaligned(uint64_t addr);
};

}  // namespace ardma

#endif  // ARDMA_CORE_MEMORY_REGION_BOUNDS_H_
