// LockClient: first-come-first-served named locks in an ardmad, exclusive or shared, with leases
// and fencing tokens — what an application embeds to coordinate work across machines.
//
//   ARDMA_ASSIGN_OR_RETURN(auto client, ardma::Client::Connect("127.0.0.1:15712"));
//   ardma::lock::LockClient locks(client.get(), ardma::Mode::kActive);
//   {
//     ARDMA_ASSIGN_OR_RETURN(ardma::lock::LockGuard guard,
//                            ardma::lock::LockGuard::Acquire(locks, "nightly-report",
//                                                            ardma::lock::LockMode::kExclusive,
//                                                            /*timeout=*/absl::Seconds(30)));
//     // ... work; pass guard.token() to the storage you write, which rejects smaller tokens ...
//     // Longer than the lease (10 s by default)? Call guard.Renew() before guard.lease_deadline().
//   }  // released here
//
// Semantics (docs/lock.md):
//  - Locks are created on first use. Requests are served strictly in arrival order (ticket order)
//    across both modes: a shared request waits behind any earlier exclusive one, so a stream of
//    readers cannot starve a writer; consecutive shared holders overlap.
//  - Every grant carries a lease and a fencing token that increases on every grant. A holder that
//    does not release or renew within its lease loses the lock to the next waiter; its Release and
//    Renew then fail with FAILED_PRECONDITION. lease_deadline() is conservative (counted from when
//    the request was sent).
//  - Mode::kActive: Acquire is one round trip even when it has to wait (the request waits on the
//    server and is answered when granted); Release and Renew are one each. If the connection
//    closes, the server releases its locks and gives up its waits at once.
//  - Mode::kRdma: the same algorithm runs here over one-sided operations: a ticket is one
//    FETCH_ADD, waiting polls with READs and backoff; an uncontended acquire is 4 round trips,
//    release 2.
//
// Errors: InvalidArgument (bad name or lease), DeadlineExceeded (not granted within the timeout),
// FailedPrecondition (the grant was lost), Aborted (a waiter was too slow to notice its turn for
// a whole lease), the Client's transport errors.
//
// Over a cluster (a cluster::Cluster as the Servers), each lock lives whole on the owner of its
// name's slot (namespace "lock"); a Grant goes back to the server that gave it.
//
// Borrows the Client (or Servers) for its lifetime. Thread-safe.
#ifndef ARDMA_SERVICES_LOCK_LOCK_CLIENT_H_
#define ARDMA_SERVICES_LOCK_LOCK_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/servers.h"
#include "services/lock/lock_format.h"
#include "services/root_cache.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(lock);

namespace ardma::lock {

enum class LockMode { kShared, kExclusive };

// One held lock.
struct Grant {
  std::string name;
  LockMode mode = LockMode::kExclusive;
  uint64_t token = 0;         // fencing token: larger than every earlier grant's
  absl::Time lease_deadline;  // renew or release before this (client clock, conservative)
  absl::Duration lease;
  // Where it is held (for Release / Renew).
  uint64_t addr = 0, ticket = 0, word = 0;
};

// A snapshot of one lock, for tools.
struct LockState {
  uint64_t tickets_taken = 0;  // every Acquire / TryAcquire ever made on it
  uint64_t tokens_issued = 0;  // grants so far
  uint64_t holders = 0;
  uint64_t waiters = 0;
};

class LockClient {
 public:
  LockClient(Client* client, Mode mode, CallOptions options = {})
      : one_(std::make_unique<OneServer>(client)), servers_(one_.get()), mode_(mode),
        options_(options) {}
  LockClient(Servers* servers, Mode mode, CallOptions options = {})
      : servers_(servers), mode_(mode), options_(options) {}

  // Waits up to `timeout` (absl::InfiniteDuration() for ever) for the lock.
  absl::StatusOr<Grant> Acquire(std::string_view name, LockMode mode, absl::Duration timeout,
                                absl::Duration lease = kDefaultLease);
  // The lock if it is free for `mode` right now (nobody holds it incompatibly or waits), else
  // nullopt.
  absl::StatusOr<std::optional<Grant>> TryAcquire(std::string_view name, LockMode mode,
                                                  absl::Duration lease = kDefaultLease);
  absl::Status Release(const Grant& grant);
  // Extends the lease to `lease` from now; updates grant.
  absl::Status Renew(Grant& grant, absl::Duration lease = kDefaultLease);
  absl::StatusOr<LockState> Inspect(std::string_view name);

  Mode mode() const { return mode_; }

 private:
  absl::StatusOr<std::optional<Grant>> Run(std::string_view name, LockMode mode,
                                           absl::Duration wait, absl::Duration lease);
  // Runs `function` about lock `name` on the server that holds it.
  absl::StatusOr<std::string> Call(Client& client, Mode mode, std::string_view function,
                                   std::string_view args,
                                   absl::Duration wait = absl::ZeroDuration());
  absl::StatusOr<std::string> Call(std::string_view name, Mode mode, std::string_view function,
                                   std::string_view args);
  absl::Status Kick(Client& client, uint64_t addr);
  // How long a call follows the redirects of a slot that is moving.
  absl::Duration RedirectTimeout() const;

  std::unique_ptr<OneServer> one_;  // when given one Client
  Servers* const servers_;
  const Mode mode_;
  const CallOptions options_;
  RootCache<uint64_t> addrs_;  // RDMA mode: lock block addresses by server and name
};

// Holds a lock for its lifetime (movable, not copyable).
class LockGuard {
 public:
  static absl::StatusOr<LockGuard> Acquire(LockClient& locks, std::string_view name, LockMode mode,
                                           absl::Duration timeout,
                                           absl::Duration lease = kDefaultLease);
  LockGuard(LockGuard&& other) noexcept;
  LockGuard& operator=(LockGuard&& other) noexcept;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  ~LockGuard();  // releases, ignoring errors (a lost lock has nothing left to release)

  const Grant& grant() const { return grant_; }
  uint64_t token() const { return grant_.token; }
  absl::Time lease_deadline() const { return grant_.lease_deadline; }
  absl::Status Renew(absl::Duration lease = kDefaultLease);
  // Releases now and reports the outcome; the destructor then does nothing.
  absl::Status Release();

 private:
  LockGuard(LockClient* locks, Grant grant) : locks_(locks), grant_(std::move(grant)) {}
  LockClient* locks_;  // null once released or moved from
  Grant grant_;
};

}  // namespace ardma::lock

#endif  // ARDMA_SERVICES_LOCK_LOCK_CLIENT_H_
