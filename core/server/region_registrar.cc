#include "core/server/region_registrar.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string LinkTarget(const std::string& link) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf));
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

RegionRegistrar::~RegionRegistrar() {
  std::vector<wire::RegionId> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : entries_) ids.push_back(id);
  }
  for (wire::RegionId id : ids) Remove(id);
}

absl::StatusOr<std::unique_ptr<Region>> RegionRegistrar::MapRequested(
    const wire::RegisterRequest& req, pid_t peer_pid) const {
  int mode = (req.writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
  std::string name;
  int fd = -1;
  if (req.kind == wire::RegisterKind::kFile) {
    if (limits_.dir.empty()) {
      return absl::FailedPreconditionError(
          "this server registers no files (start ardmad with --register-dir DIR)");
    }
    name = std::string(req.path);
    // Never through a symbolic link; and where the file really is decides, not how it was named.
    fd = ::open(name.c_str(), mode | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      if (e == ELOOP) {
        return absl::PermissionDeniedError(absl::StrCat(name, " is a symbolic link"));
      }
      return absl::Status(
          e == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kPermissionDenied,
          absl::StrCat("open ", name, ": ", std::strerror(e)));
    }
  } else {
    if (peer_pid <= 0) {
      return absl::FailedPreconditionError(
          "a memfd can be registered over a Unix-socket connection only (unix:PATH or "
          "ucx://unix:PATH), where the server knows the process");
    }
    std::string link = absl::StrCat("/proc/", peer_pid, "/fd/", req.fd);
    name = LinkTarget(link);
    if (!absl::StartsWith(name, "/memfd:")) {
      return absl::PermissionDeniedError(absl::StrCat("descriptor ", req.fd, " of the client is ",
                                                      name.empty() ? "not open" : name,
                                                      ", not a memfd"));
    }
    fd = ::open(link.c_str(), mode);
    if (fd < 0) {
      return absl::PermissionDeniedError(absl::StrCat("open ", link, ": ", ErrnoText()));
    }
  }
  Fd file(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return absl::InternalError(absl::StrCat("stat ", name));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a regular file"));
  }
  if (req.kind == wire::RegisterKind::kFile) {
    char dir[PATH_MAX];
    if (::realpath(limits_.dir.c_str(), dir) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("--register-dir ", limits_.dir, ": ", ErrnoText()));
    }
    std::string real = LinkTarget(absl::StrCat("/proc/self/fd/", fd));
    if (!absl::StartsWith(real, absl::StrCat(dir, "/"))) {
      return absl::PermissionDeniedError(
          absl::StrCat(name, " is not under the server's --register-dir ", limits_.dir));
    }
  } else if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    // Sealed against shrinking, a memfd can never pull pages out from under the mapping.
    return absl::FailedPreconditionError(absl::StrCat("cannot seal ", name, " against shrinking (",
                                                      ErrnoText(),
                                                      "); create it with MFD_ALLOW_SEALING"));
  }
  uint64_t have = static_cast<uint64_t>(st.st_size);
  uint64_t size = req.size == 0 ? have : req.size;
  if (size == 0) return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
  if (size > have) {
    return absl::OutOfRangeError(
        absl::StrCat("a region of ", size, " bytes asked of ", name, ", which holds ", have));
  }
  return Region::MapFile(fd, size, /*read_only=*/!req.writable);
}

absl::StatusOr<wire::UcxRegionKey> RegionRegistrar::Register(const wire::RegisterRequest& req,
                                                             const void* owner, pid_t peer_pid,
                                                             const security::Grant& grant) {
  auto refuse = [this](absl::Status s) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return s;
  };
  absl::StatusOr<std::unique_ptr<Region>> mapped = MapRequested(req, peer_pid);
  if (!mapped.ok()) return refuse(mapped.status());
  std::shared_ptr<Region> region = *std::move(mapped);
  std::vector<std::shared_ptr<Region>> expired;  // unmapped after the lock is released
  {
    absl::MutexLock lock(&mu_);
    expired = Expire(absl::Now());
    const size_t held = entries_.size() + quarantined_.size();
    if (held >= limits_.max_regions) {
      return refuse(absl::ResourceExhaustedError(absl::StrCat(
          "the server has ", held, " regions mapped, its limit (", quarantined_.size(),
          " of them deregistered and kept for up to ", absl::FormatDuration(limits_.quarantine),
          " so that a one-sided access already sent cannot reach memory mapped after them)")));
    }
    if (per_owner_[owner] >= limits_.max_per_connection) {
      return refuse(absl::ResourceExhaustedError(absl::StrCat(
          "this connection has ", limits_.max_per_connection, " registered regions, its limit")));
    }
    if (bytes_ + quarantined_bytes_ + region->size() > limits_.max_bytes) {
      return refuse(absl::ResourceExhaustedError(absl::StrCat(
          "registering ", region->size(), " more bytes would pass the server's limit of ",
          limits_.max_bytes, " registered bytes (", quarantined_bytes_,
          " of them in deregistered regions kept mapped for up to ",
          absl::FormatDuration(limits_.quarantine), ")")));
    }
    bytes_ += region->size();
    ++per_owner_[owner];
  }
  auto unreserve = [&] {
    absl::MutexLock lock(&mu_);
    bytes_ -= region->size();
    if (--per_owner_[owner] == 0) per_owner_.erase(owner);
  };
  absl::StatusOr<wire::RegionId> id = regions_->AddDynamic(region);
  if (!id.ok()) {
    unreserve();
    return refuse(id.status());
  }
  std::string rkey;
  if (RegionKeys* keys = keys_.load(); keys != nullptr) {
    absl::StatusOr<std::string> added = keys->Add(*id, *region);
    if (!added.ok()) {
      regions_->RemoveDynamic(*id);
      unreserve();
      return refuse(added.status());
    }
    rkey = *std::move(added);
  }
  {
    absl::MutexLock lock(&mu_);
    entries_[*id] = Entry{owner, region->size(), region->read_only()};
  }
  registered_total_.fetch_add(1, std::memory_order_relaxed);
  ARDMA_LOG(kDebug, "registered region %u: %s, %u bytes, %s", *id,
            req.kind == wire::RegisterKind::kFile ? std::string(req.path) : "a memfd",
            region->size(), region->read_only() ? "read-only" : "writable");
  return KeyFor(*id, *region, std::move(rkey), grant);
}

wire::UcxRegionKey RegionRegistrar::KeyFor(wire::RegionId id, const Region& region,
                                           std::string rkey, const security::Grant& grant) const {
  wire::UcxRegionKey key;
  key.region = id;
  key.base = reinterpret_cast<uint64_t>(region.data());
  key.size = region.size();
  key.read_only = region.read_only();
  // As at UCX_CONNECT: a key is a mapping, so only for those who may do what it allows.
  if (grant.MayRead(id) && (grant.MayWrite(id) || key.read_only)) key.rkey = std::move(rkey);
  return key;
}

absl::Status RegionRegistrar::Deregister(wire::RegionId id, const void* owner) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("no registered region ", id));
    }
    if (it->second.owner != owner) {
      return absl::PermissionDeniedError(
          absl::StrCat("region ", id, " was registered by another connection"));
    }
  }
  Remove(id);
  return absl::OkStatus();
}

absl::StatusOr<wire::UcxRegionKey> RegionRegistrar::Info(wire::RegionId id,
                                                         const security::Grant& grant) const {
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(id));
  RegionKeys* keys = keys_.load();
  return KeyFor(id, *region, keys != nullptr ? keys->Rkey(id) : std::string(), grant);
}

void RegionRegistrar::Remove(wire::RegionId id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    bytes_ -= it->second.size;
    if (--per_owner_[it->second.owner] == 0) per_owner_.erase(it->second.owner);
    entries_.erase(it);
  }
  // Unreachable first (no new lookups, no new one-sided access), then unmapped once the last
  // request using it lets go.
  std::shared_ptr<Region> region = regions_->RemoveDynamic(id);
  if (RegionKeys* keys = keys_.load(); keys != nullptr) keys->Remove(id);
  std::vector<std::shared_ptr<Region>> expired;  // unmapped after the lock is released
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  expired = Expire(now);
  if (region != nullptr && limits_.quarantine > absl::ZeroDuration()) {
    quarantined_bytes_ += region->size();
    quarantined_.emplace_back(now + limits_.quarantine, std::move(region));
  }
}

std::vector<std::shared_ptr<Region>> RegionRegistrar::Expire(absl::Time now) {
  std::vector<std::shared_ptr<Region>> expired;
  while (!quarantined_.empty() && quarantined_.front().first <= now) {
    quarantined_bytes_ -= quarantined_.front().second->size();
    expired.push_back(std::move(quarantined_.front().second));
    quarantined_.pop_front();
  }
  return expired;
}

void RegionRegistrar::OwnerGone(const void* owner) {
  std::vector<wire::RegionId> ids;
  {
    absl::MutexLock lock(&mu_);
    if (!per_owner_.contains(owner)) return;
    for (const auto& [id, e] : entries_) {
      if (e.owner == owner) ids.push_back(id);
    }
  }
  for (wire::RegionId id : ids) Remove(id);
}

void RegionRegistrar::AppendStats(std::vector<wire::StatsEntry>* out) const {
  {
    absl::MutexLock lock(&mu_);
    out->emplace_back("regions.registered", entries_.size());
    out->emplace_back("regions.bytes", bytes_);
    out->emplace_back("regions.quarantined", quarantined_.size());
  }
  out->emplace_back("regions.registered_total", registered_total_.load(std::memory_order_relaxed));
  out->emplace_back("regions.refused", refused_.load(std::memory_order_relaxed));
}

}  // namespace ardma
