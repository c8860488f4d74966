// A member's slot fence (core/slots.h) kept in step with the slot map, and the mover's changes
// to it (docs/cluster.md, "Moving slots").
//
// Who writes a fence word: the member itself only ever marks "owned" a slot the map gives it that
// is not owned here yet (the first map, or a member the map names before it had any slot); every
// other change — frozen, owned on the receiving server, moved — is the mover's, in that order,
// before the map changes.
#ifndef ARDMA_CORE_CLUSTER_FENCE_H_
#define ARDMA_CORE_CLUSTER_FENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster/slot.h"
#include "core/context/context.h"

namespace ardma::cluster {

// The fence's address in this memory, created (every slot not owned) if there is none.
absl::StatusOr<uint64_t> OpenFence(Context& ctx);
// Marks owned, at the map's epoch, every slot `map` gives `self` that is not owned here. In a
// cluster with replicas, also marks moved (to the map's owner) every slot owned here that the map
// gives another member: failover took it from this member.
absl::Status AdoptSlots(Context& ctx, const SlotMap& map, const std::string& self);

// A member id (16 hex digits) as the fence's owner word; 0 if it is not one.
uint64_t IdWord(const std::string& id);

// The fence words (word 0 of each entry) of `slots`, read in one pass.
absl::StatusOr<std::vector<uint64_t>> ReadFence(Context& ctx, uint64_t fence,
                                                const std::vector<uint32_t>& slots);
// Writes entry (word, owner) for each of `slots`.
absl::Status WriteFence(Context& ctx, uint64_t fence, const std::vector<uint32_t>& slots,
                        uint64_t word, uint64_t owner);

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_FENCE_H_
