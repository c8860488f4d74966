// Region: one contiguous, mmap'd range of server memory that clients address by byte offset.
//
// The heap (region 0) is anonymous memory or, with a memory file, a MAP_SHARED mapping of that
// file, so every acknowledged write is in the page cache and survives the server process being
// killed. Every access is bounds-checked; CompareAndSwap and FetchAdd are real atomics
// (std::atomic_ref<uint64_t>) on 8-byte aligned words, coherent across threads. Plain Read/Write
// are memcpy and may tear under concurrent writers, exactly like RDMA.
//
// Thread-safe: any number of threads may access a Region concurrently. The Region owns its mapping.
//
//   ARDMA_ASSIGN_OR_RETURN(auto heap, Region::Create({.size = 1 << 30}));
//   ARDMA_RETURN_IF_ERROR(heap->Write(64, "hello"));
#ifndef ARDMA_CORE_MEMORY_REGION_H_
#define ARDMA_CORE_MEMORY_REGION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "core/memory/region_bounds.h"

namespace ardma {

struct RegionOptions {
  uint64_t size = 0;       // bytes; for a file that already exists, 0 means "the file's size"
  std::string file;        // empty: anonymous memory
  bool read_only = false;  // clients may read but not write, CAS or FETCH_ADD
};

class Region {
 public:
  static absl::StatusOr<std::unique_ptr<Region>> Create(const RegionOptions& options);
  // A region over memory someone else mapped (e.g. shared memory a transport allocated, so its
  // peers can map it too); `release` runs when the region is destroyed.
  static std::unique_ptr<Region> Adopt(char* base, uint64_t size, bool read_only,
                                       std::function<void()> release);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  uint64_t size() const { return bounds_.size; }
  bool read_only() const { return bounds_.read_only; }
  const RegionBounds& bounds() const { return bounds_; }
  bool file_backed() const { return file_backed_; }
  // True when the mapping came from an existing, non-empty file (its data was kept).
  bool reopened() const { return reopened_; }

  // OutOfRange unless [addr, addr + len) lies inside the region.
  absl::Status CheckRange(uint64_t addr, uint64_t len) const {
    return bounds_.CheckRange(addr, len);
  }
  // PermissionDenied for a read-only region, then CheckRange.
  absl::Status CheckWritable(uint64_t addr, uint64_t len) const {
    return bounds_.CheckWritable(addr, len);
  }

  absl::Status Read(uint64_t addr, std::span<char> out) const;
  absl::Status Write(uint64_t addr, std::string_view data);
  absl::StatusOr<CasResult> CompareAndSwap(uint64_t addr, uint64_t expected, uint64_t desired);
  absl::StatusOr<uint64_t> FetchAdd(uint64_t addr, uint64_t delta);
  absl::StatusOr<std::string_view> View(uint64_t addr, uint64_t len) const;

  // Direct access for code that has already checked its range (the server's batch paths).
  char* data() { return base_; }
  const char* data() const { return base_; }

 private:
  Region(char* base, uint64_t size, bool read_only, bool file_backed, bool reopened,
         std::function<void()> release)
      : base_(base),
        bounds_{size, read_only},
        file_backed_(file_backed),
        reopened_(reopened),
        release_(std::move(release)) {}

  char* const base_;
  const RegionBounds bounds_;
  const bool file_backed_;
  const bool reopened_;
  const std::function<void()> release_;  // unmaps
};

// The server's regions by id; region 0 is the heap. Regions are added before the server starts
// serving and never removed, so lookups need no lock.
class RegionTable {
 public:
  // Shared: a region may also be owned by whoever writes it directly (e.g. the load monitor's
  // agent, which publishes into a read-only region).
  RegionId Add(std::shared_ptr<Region> region);
  // NotFound for an unknown id.
  absl::StatusOr<Region*> Get(RegionId id) const {
    if (id >= regions_.size()) [[unlikely]] return NoRegion(id);
    return regions_[id].get();
  }
  size_t size() const { return regions_.size(); }

 private:
  static absl::Status NoRegion(RegionId id);

  std::vector<std::shared_ptr<Region>> regions_;
};

// Parses sizes like "4096", "64K", "512M", "1G" (binary multiples).
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

}  // namespace ardma

#endif  // ARDMA_CORE_MEMORY_REGION_H_
