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

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
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
  // A shared mapping of `size` bytes of the open file `fd` (which the caller keeps and closes);
  // read-only maps it without PROT_WRITE. The file must hold `size` bytes for as long as the
  // region lives: a page past its end faults (SIGBUS) when touched.
  static absl::StatusOr<std::unique_ptr<Region>> MapFile(int fd, uint64_t size, bool read_only);
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

  // Writes [addr, addr + len) (whole pages) of a file-backed region to its file and waits for the
  // device (msync MS_SYNC); nothing for anonymous memory. Internal on an I/O error.
  absl::Status Sync(uint64_t addr, uint64_t len);

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
  bool reopened_;                        // set once, by Create
  const std::function<void()> release_;  // unmaps
};

// A region looked up in a RegionTable. A region added before serving lives as long as the table,
// so its reference is a bare pointer; one registered at run time is shared, so it stays mapped
// while anyone still uses it, even after it was removed from the table.
class RegionRef {
 public:
  RegionRef() = default;
  explicit RegionRef(Region* region) : region_(region) {}
  explicit RegionRef(std::shared_ptr<Region> shared)
      : region_(shared.get()), shared_(std::move(shared)) {}

  Region* get() const { return region_; }
  Region* operator->() const { return region_; }
  Region& operator*() const { return *region_; }
  // Non-null for a region registered at run time.
  const std::shared_ptr<Region>& shared() const { return shared_; }

 private:
  Region* region_ = nullptr;
  std::shared_ptr<Region> shared_;
};

// The server's regions by id; region 0 is the heap. Static regions are added before the server
// starts serving and never removed, so their lookups take no lock. Regions registered at run time
// (REGISTER) get ids from kFirstDynamicRegion on, never reused, and are looked up under a lock.
class RegionTable {
 public:
  static constexpr RegionId kFirstDynamicRegion = 1u << 16;

  // Shared: a region may also be owned by whoever writes it directly (e.g. the load monitor's
  // agent, which publishes into a read-only region). Before serving only.
  RegionId Add(std::shared_ptr<Region> region);
  // NotFound for an unknown id.
  absl::StatusOr<RegionRef> Get(RegionId id) const {
    if (id < regions_.size()) [[likely]]
      return RegionRef(regions_[id].get());
    return GetDynamic(id);
  }
  // Number of static regions (ids 0 .. size()-1).
  size_t size() const { return regions_.size(); }

  // A region registered at run time; RESOURCE_EXHAUSTED once the ids run out.
  absl::StatusOr<RegionId> AddDynamic(std::shared_ptr<Region> region);
  // Removes a dynamic region; null if there is none by that id.
  std::shared_ptr<Region> RemoveDynamic(RegionId id);
  static bool IsDynamic(RegionId id) { return id >= kFirstDynamicRegion; }

 private:
  static absl::Status NoRegion(RegionId id);
  absl::StatusOr<RegionRef> GetDynamic(RegionId id) const;

  std::vector<std::shared_ptr<Region>> regions_;
  mutable absl::Mutex mu_;
  RegionId next_dynamic_ ABSL_GUARDED_BY(mu_) = kFirstDynamicRegion;
  absl::flat_hash_map<RegionId, std::shared_ptr<Region>> dynamic_ ABSL_GUARDED_BY(mu_);
};

// Parses sizes like "4096", "64K", "512M", "1G" (binary multiples).
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

}  // namespace ardma

#endif  // ARDMA_CORE_MEMORY_REGION_H_
