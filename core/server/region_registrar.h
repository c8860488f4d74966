// RegionRegistrar: regions that clients register at run time (REGISTER, DEREGISTER, REGION_INFO;
// the rdistcc paper's memory regions). A client maps a file under the server's --register-dir, or one of
// its own memfds, as a new region, read-only or writable for others; the region dies with the
// connection that registered it (or at DEREGISTER). Limits on count and bytes are enforced, per
// connection and for the server.
//
// Where the server runs UCX, each new region is registered with it too (RegionKeys) and its key
// handed out, so other clients reach it one-sidedly.
//
// Thread-safe.
#ifndef ARDMA_CORE_SERVER_REGION_REGISTRAR_H_
#define ARDMA_CORE_SERVER_REGION_REGISTRAR_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/memory/region.h"
#include "core/security/auth.h"
#include "core/wire/messages.h"

namespace ardma {

struct RegistrationLimits {
  // Files may be registered from under this directory only; empty: no file registration.
  std::string dir;
  size_t max_regions = 4096;         // registered at once, the whole server
  uint64_t max_bytes = 64ull << 30;  // their sizes added up, the whole server
  size_t max_per_connection = 1024;  // registered at once by one connection
  // A removed region stays mapped (unreachable) this long, so that a one-sided write already on
  // its way through a transport that cannot revoke keys (CMA) lands in it, never in memory the
  // server maps next at that address. Until then it still counts against max_regions and
  // max_bytes: it is still a mapping (a client that registers and removes in a loop is refused,
  // where the server would otherwise run out of mappings, vm.max_map_count, and fail anything
  // that maps memory).
  absl::Duration quarantine = absl::Seconds(5);
};

// A transport that makes regions reachable one-sidedly (the UCX server).
class RegionKeys {
 public:
  virtual ~RegionKeys() = default;
  // Registers a new region; returns its packed remote key.
  virtual absl::StatusOr<std::string> Add(wire::RegionId id, const Region& region) = 0;
  virtual void Remove(wire::RegionId id) = 0;
  // The packed key of any region it knows (empty if none).
  virtual std::string Rkey(wire::RegionId id) const = 0;
};

class RegionRegistrar {
 public:
  // Borrows `regions` for its lifetime.
  RegionRegistrar(const RegistrationLimits& limits, RegionTable* regions)
      : limits_(limits), regions_(regions) {}
  ~RegionRegistrar();

  // Set before serving (null: no one-sided access to registered regions).
  void SetKeys(RegionKeys* keys) { keys_.store(keys); }

  // REGISTER for `owner` (an opaque connection identity). `peer_pid`: the process at the other
  // end of a Unix socket (0 if unknown), whose memfds may be registered.
  absl::StatusOr<wire::UcxRegionKey> Register(const wire::RegisterRequest& req, const void* owner,
                                              pid_t peer_pid, const security::Grant& grant);
  // DEREGISTER: only the owner may.
  absl::Status Deregister(wire::RegionId id, const void* owner);
  // REGION_INFO: bounds, and the key if `grant` may have it.
  absl::StatusOr<wire::UcxRegionKey> Info(wire::RegionId id, const security::Grant& grant) const;
  // Removes every region `owner` registered (its connection closed).
  void OwnerGone(const void* owner);

  // regions.registered, regions.bytes, regions.quarantined (now); regions.registered_total,
  // regions.refused.
  void AppendStats(std::vector<wire::StatsEntry>* out) const;

 private:
  struct Entry {
    const void* owner = nullptr;
    uint64_t size = 0;
    bool read_only = true;
  };
  absl::StatusOr<std::unique_ptr<Region>> MapRequested(const wire::RegisterRequest& req,
                                                       pid_t peer_pid) const;
  // The key of a region, with the rkey only for a grant that may have it (as UCX_CONNECT).
  wire::UcxRegionKey KeyFor(wire::RegionId id, const Region& region, std::string rkey,
                            const security::Grant& grant) const;
  void Remove(wire::RegionId id);
  // Takes the quarantined regions whose time has come out of the quarantine (and the counts),
  // for the caller to unmap once it has released the lock.
  std::vector<std::shared_ptr<Region>> Expire(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RegistrationLimits limits_;
  RegionTable* const regions_;
  std::atomic<RegionKeys*> keys_{nullptr};
  std::atomic<uint64_t> registered_total_{0};
  std::atomic<uint64_t> refused_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_map<wire::RegionId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const void*, size_t> per_owner_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Removed regions kept mapped until their time (RegistrationLimits::quarantine), oldest first,
  // and their sizes added up.
  std::deque<std::pair<absl::Time, std::shared_ptr<Region>>> quarantined_ ABSL_GUARDED_BY(mu_);
  uint64_t quarantined_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_REGION_REGISTRAR_H_
