#include "core/memory/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

absl::Status ErrnoStatus(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Region>> Region::Create(const RegionOptions& options) {
  uint64_t size = options.size;
  bool reopened = false;
  int fd = -1;
  if (!options.file.empty()) {
    // Never through a symbolic link: one planted where the memory file should be would point
    // the server's writes at any file its user may write.
    fd = ::open(options.file.c_str(),
                (options.read_only ? O_RDONLY : O_RDWR) | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          "memory file ", options.file, " is a symbolic link; give the file's own path"));
    }
    if (fd < 0) return ErrnoStatus(absl::StrCat("open ", options.file));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      absl::Status s = ErrnoStatus(absl::StrCat("stat ", options.file));
      ::close(fd);
      return s;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("memory file ", options.file, " is not a regular file"));
    }
    uint64_t existing = static_cast<uint64_t>(st.st_size);
    if (existing > 0) {
      if (size != 0 && size != existing) {
        ::close(fd);
        return absl::FailedPreconditionError(absl::StrCat(
            "memory file ", options.file, " holds ", existing, " bytes but a region of ", size,
            " bytes was asked for; ", "omit the size to reuse the file, or remove the file"));
      }
      size = existing;
      reopened = true;
    } else if (size == 0) {
      ::close(fd);
      return absl::InvalidArgumentError("a new memory file needs a size");
    } else if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      absl::Status s = ErrnoStatus(absl::StrCat("resize ", options.file));
      ::close(fd);
      return s;
    }
  }
  if (size == 0) return absl::InvalidArgumentError("a region needs a non-zero size");

  if (fd >= 0) {
    absl::StatusOr<std::unique_ptr<Region>> region = MapFile(fd, size, options.read_only);
    ::close(fd);
    if (region.ok()) (*region)->reopened_ = reopened;
    return region;
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap of ", size, " bytes"));
  return std::unique_ptr<Region>(new Region(static_cast<char*>(base), size, options.read_only,
                                            /*file_backed=*/false, /*reopened=*/false,
                                            [base, size] { ::munmap(base, size); }));
}

absl::StatusOr<std::unique_ptr<Region>> Region::MapFile(int fd, uint64_t size, bool read_only) {
  if (size == 0) return absl::InvalidArgumentError("a region needs a non-zero size");
  int prot = PROT_READ | (read_only ? 0 : PROT_WRITE);
  void* base = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap of ", size, " bytes"));
  return std::unique_ptr<Region>(new Region(static_cast<char*>(base), size, read_only,
                                            /*file_backed=*/true, /*reopened=*/true,
                                            [base, size] { ::munmap(base, size); }));
}

std::unique_ptr<Region> Region::Adopt(char* base, uint64_t size, bool read_only,
                                      std::function<void()> release) {
  return std::unique_ptr<Region>(new Region(base, size, read_only, /*file_backed=*/false,
                                            /*reopened=*/false, std::move(release)));
}

absl::Status Region::Sync(uint64_t addr, uint64_t len) {
  if (!file_backed_ || bounds_.read_only || len == 0) return absl::OkStatus();
  ARDMA_RETURN_IF_ERROR(CheckRange(addr, len));
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t begin = addr / page * page;
  uint64_t end = std::min(bounds_.size, (addr + len + page - 1) / page * page);
  if (::msync(base_ + begin, end - begin, MS_SYNC) != 0) return ErrnoStatus("msync");
  return absl::OkStatus();
}

Region::~Region() {
  if (release_) release_();
}

absl::Status Region::Read(uint64_t addr, std::span<char> out) const {
  ARDMA_RETURN_IF_ERROR(CheckRange(addr, out.size()));
  std::memcpy(out.data(), base_ + addr, out.size());
  return absl::OkStatus();
}

absl::Status Region::Write(uint64_t addr, std::string_view data) {
  ARDMA_RETURN_IF_ERROR(CheckWritable(addr, data.size()));
  std::memcpy(base_ + addr, data.data(), data.size());
  return absl::OkStatus();
}

absl::StatusOr<CasResult> Region::CompareAndSwap(uint64_t addr, uint64_t expected,
                                                 uint64_t desired) {
  ARDMA_RETURN_IF_ERROR(bounds_.CheckAtomic(addr));
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(base_ + addr));
  uint64_t observed = expected;
  bool swapped = word.compare_exchange_strong(observed, desired, std::memory_order_seq_cst);
  return CasResult{swapped, observed};
}

absl::StatusOr<uint64_t> Region::FetchAdd(uint64_t addr, uint64_t delta) {
  ARDMA_RETURN_IF_ERROR(bounds_.CheckAtomic(addr));
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(base_ + addr));
  return word.fetch_add(delta, std::memory_order_seq_cst);
}

absl::StatusOr<std::string_view> Region::View(uint64_t addr, uint64_t len) const {
  ARDMA_RETURN_IF_ERROR(CheckRange(addr, len));
  return std::string_view(base_ + addr, len);
}

RegionId RegionTable::Add(std::shared_ptr<Region> region) {
  regions_.push_back(std::move(region));
  return static_cast<RegionId>(regions_.size() - 1);
}

absl::StatusOr<RegionRef> RegionTable::GetDynamic(RegionId id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = dynamic_.find(id);
  if (it == dynamic_.end()) return NoRegion(id);
  return RegionRef(it->second);
}

absl::StatusOr<RegionId> RegionTable::AddDynamic(std::shared_ptr<Region> region) {
  absl::MutexLock lock(&mu_);
  if (next_dynamic_ == UINT32_MAX) {
    return absl::ResourceExhaustedError("region ids are used up; restart the server");
  }
  RegionId id = next_dynamic_++;
  dynamic_[id] = std::move(region);
  return id;
}

std::shared_ptr<Region> RegionTable::RemoveDynamic(RegionId id) {
  absl::MutexLock lock(&mu_);
  auto it = dynamic_.find(id);
  if (it == dynamic_.end()) return nullptr;
  std::shared_ptr<Region> region = std::move(it->second);
  dynamic_.erase(it);
  return region;
}

absl::Status RegionTable::NoRegion(RegionId id) {
  return absl::NotFoundError(absl::StrCat("no region ", id));
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty size");
  uint64_t multiplier = 1;
  char last = text.back();
  switch (last) {
    case 'k':
    case 'K':
      multiplier = 1ull << 10;
      break;
    case 'm':
    case 'M':
      multiplier = 1ull << 20;
      break;
    case 'g':
    case 'G':
      multiplier = 1ull << 30;
      break;
    case 't':
    case 'T':
      multiplier = 1ull << 40;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  uint64_t value;
  if (!absl::SimpleAtoi(ToAbsl(text), &value) || value > UINT64_MAX / multiplier) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size '", ToAbsl(text), "' (expected e.g. 4096, 64K, 512M, 1G)"));
  }
  return value * multiplier;
}

}  // namespace ardma
