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
  absl::Status CheckRange(uint64_t addr, uint64_t len) const;
  // PermissionDenied for a read-only region, then CheckRange.
  absl::Status CheckWritable(uint64_t addr, uint64_t len) const;
  // InvalidArgument unless 8-byte aligned, then CheckWritable(addr, 8).
  absl::Status CheckAtomic(uint64_t addr) const;
};

}  // namespace ardma

#endif  // ARDMA_CORE_MEMORY_REGION_BOUNDS_H_
