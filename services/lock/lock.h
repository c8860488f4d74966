// The FCFS lock service's algorithm: shared/exclusive locks with leases and fencing tokens,
// written once against Context (layout and rules: lock_format.h). On the server (active mode) a
// waiter parks and is resumed when its turn may have come; on a client (RDMA mode) it polls. The
// active-code library that exposes it (argument parsing and the function table) is
// lock_functions.cc; the typed client is LockClient.
//
//   ARDMA_ASSIGN_OR_RETURN(lock::Acquired got, lock::Acquire(ctx, {.name = "db", .wait = ...}));
//   if (got && got->granted) { ... lock::Release(ctx, {got->addr, got->ticket, got->word}) ... }
//
// Every function may run concurrently with any other, from any number of clients and active
// functions. A cached block address that holds no lock (or another lock) fails with a stale-root
// status (root_cache.h).
#ifndef ARDMA_SERVICES_LOCK_LOCK_H_
#define ARDMA_SERVICES_LOCK_LOCK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/context/context.h"
#include "services/lock/lock_format.h"

namespace ardma::lock {

// The block of the lock `name`, created on first use (through the DHT table "locks"). On a
// cluster member that does not serve the name's slot, the redirect (slots::RedirectOf).
absl::StatusOr<uint64_t> Resolve(Context& ctx, std::string_view name);
// The block of the lock `name` on this server, if it has one; never creates one.
absl::StatusOr<std::optional<uint64_t>> Find(Context& ctx, std::string_view name);

// What an observer remembers of a lock's first live ticket between looks, to release it once its
// slot word stayed unchanged for the ticket's lease (on the observer's clock).
struct LeaseWatch {
  uint64_t ticket = ~0ull, word = 0;
  absl::Time since;
};

// An acquire's outcome: a result (granted, or not granted for a try or a timeout), or nullopt when
// the request parked on the server — its answer comes later from a Wake or a resumed run.
using Acquired = std::optional<AcquireResult>;
// Takes a ticket for args.name (or the block at args.addr) and waits for its turn: args.wait zero
// is a try, InfiniteDuration waits forever. DEADLINE_EXCEEDED when the wait runs out.
absl::StatusOr<Acquired> Acquire(Context& ctx, const AcquireArgs& args);
// Goes on with a parked waiter; `continuation` is the resume argument its park left.
absl::StatusOr<Acquired> Continue(Context& ctx, std::string_view continuation);

// A granted ticket: its block, ticket and the slot word its grant (or last renewal) wrote.
struct Held {
  uint64_t addr = 0, t = 0, word = 0;
};
// Releases; returns whether an active waiter needs a lock.kick (RDMA mode cannot resume it).
// FAILED_PRECONDITION if the ticket no longer holds the lock.
absl::StatusOr<bool> Release(Context& ctx, const Held& held);
// Renews the lease; returns the new slot word.
absl::StatusOr<uint64_t> Renew(Context& ctx, const Held& held, absl::Duration lease);
// Releases whatever ticket t holds or waits for (a close hook); nothing if it is gone already.
absl::Status Drop(Context& ctx, uint64_t addr, uint64_t t);
// Resumes the parked waiters whose turn has come. Server only.
absl::Status Kick(Context& ctx, uint64_t addr);

struct Inspection {
  uint64_t addr = 0, next_ticket = 0, fence = 0, holders = 0, waiters = 0;
};
absl::StatusOr<Inspection> Inspect(Context& ctx, std::string_view name);

// ---- Moving a lock to another server (a cluster's slot moves: docs/cluster.md) ----
//
// Only a free lock moves: the giver seals it (tickets taken from then on are redirected), waits
// until every ticket taken before is released, and the receiver adopts it with the same next
// ticket and fencing-token count, so tokens keep growing across the move. Waiters parked on one
// server cannot be carried to another, hence "free".

struct SealedLock {
  std::string name;
  uint64_t addr = 0;
  uint64_t tail = 0;   // the first ticket not taken before the seal
  uint64_t fence = 0;  // tokens issued (final once drained)
};
// Seals the lock `name` of this server (sealing a sealed lock changes nothing). NotFound if this
// server has none. Run by one mover at a time.
absl::StatusOr<SealedLock> Seal(Context& ctx, std::string_view name);
// Whether every ticket below the seal was released; updates lock.fence. Like a waiter, it
// releases a first ticket whose lease ran out unchanged (watched across calls through `watch`).
absl::StatusOr<bool> Drained(Context& ctx, SealedLock& lock, LeaseWatch& watch);
// Serves the lock at `addr` again from where it was sealed (nothing if it is not sealed).
absl::Status Unseal(Context& ctx, uint64_t addr);
// On the receiving server: the lock as `from` left the giver, sealed (Unseal it once the slot is
// served here). Reuses the block a lock of that name left here when it moved away before.
// Returns the block's address.
absl::StatusOr<uint64_t> Adopt(Context& ctx, const SealedLock& from);

}  // namespace ardma::lock

#endif  // ARDMA_SERVICES_LOCK_LOCK_H_
