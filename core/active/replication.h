// What a cluster member whose slots have replicas offers the code it runs (docs/cluster.md,
// "Replication"): a replicated write's place in its slot's order, and whether a stale read may be
// answered here. The server implements it (core/server/slot_replication.h); LocalContext asks it
// from Context::CheckSlot.
#ifndef ARDMA_CORE_ACTIVE_REPLICATION_H_
#define ARDMA_CORE_ACTIVE_REPLICATION_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace ardma {

class Replication {
 public:
  // A replicated write's place: the `seq`th write of `slot` since this server started.
  struct Ticket {
    uint32_t slot = 0;
    uint64_t seq = 0;
  };
  virtual ~Replication() = default;
  // Orders a write of `slot`, which this member owns with replicas. UNAVAILABLE while the member
  // is fenced (it could not renew its membership in time: another may be primary by now).
  virtual absl::StatusOr<Ticket> Order(uint32_t slot) = 0;
  // Whether this member is a replica of `slot` (a stale read of it may be answered here).
  virtual bool Replicates(uint32_t slot) const = 0;
  // Whether this member may have lost its membership (self-fencing): it then answers no read of
  // a slot it owns replicated either, as another member may be the slot's primary by now.
  virtual bool Fenced() const = 0;
};

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_REPLICATION_H_
