// Moving locks between the servers of a cluster, for its rebalance (docs/cluster.md, "Moving
// slots"): what the mover runs, over one-sided operations, against the server a lock slot leaves
// and the server it goes to (the algorithm: lock.h, "Moving a lock").
#ifndef ARDMA_SERVICES_LOCK_LOCK_MOVER_H_
#define ARDMA_SERVICES_LOCK_LOCK_MOVER_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/client/client.h"
#include "services/lock/lock.h"

namespace ardma::lock {

// The names of the locks `server` holds whose slots are in `slots`.
absl::StatusOr<std::vector<std::string>> LocksIn(Client& server, const std::set<uint32_t>& slots);

// Seals the locks of `slots` on `giver` (their slots must be frozen there first) and waits until
// `deadline` for each to be free. Returns the free ones, sealed; the slots of the others go into
// `busy`, and every lock of those slots is served again.
absl::StatusOr<std::vector<SealedLock>> SealWhenFree(Client& giver, const std::set<uint32_t>& slots,
                                                     absl::Time deadline,
                                                     std::set<uint32_t>* busy);

// Adopts each of `locks` on `receiver`, sealed until UnsealIn.
absl::Status AdoptAll(Client& receiver, const std::vector<SealedLock>& locks);

// Serves the locks of `slots` on `server` again (after a move onto it, or an undone move).
absl::Status UnsealIn(Client& server, const std::set<uint32_t>& slots);
// Seals the locks of `slots` on `server` (slots it no longer owns: `cluster fix`).
absl::Status SealIn(Client& server, const std::set<uint32_t>& slots);

}  // namespace ardma::lock

#endif  // ARDMA_SERVICES_LOCK_LOCK_MOVER_H_
