// SlotReplication: a cluster member's side of replicated slots (docs/cluster.md, "Replication").
//
// As a primary: a write to one of its replicated slots takes its place in the slot's order when
// its fence check passes (Order, from Context::CheckSlot, under the key's lock), runs, and is then
// forwarded — the same function with the same arguments — to every replica of the member, after
// every earlier write of the slot (Forward); the client is answered only once every replica has
// applied it. Operation shipping: a replica runs the service's own code on its own memory, so the
// two hold the same keys and values, at their own addresses.
// As a replica: it applies each slot's writes in the primary's order and once (Admit, Applied);
// one that arrives after a gap (the replica missed a write: it was down, or restarted) is refused,
// and so is every later one, until the replica is filled again.
// Self-fencing: replicated writes are refused once the membership lease may have expired
// (SetWritableUntil), before etcd can hand the slots to another member.
//
// Thread-safe.
#ifndef ARDMA_CORE_SERVER_SLOT_REPLICATION_H_
#define ARDMA_CORE_SERVER_SLOT_REPLICATION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/active/replication.h"
#include "core/context/context.h"

namespace ardma {

// Where a replicated write stands in its primary's order: the prefix of its arguments on the way
// to a replica (wire::kFlagReplica).
struct ReplicaOrder {
  uint32_t slot = 0;
  uint64_t incarnation = 0;  // the primary's process, random at its start
  uint64_t seq = 0;          // 1 for the slot's first write in that incarnation
};
inline constexpr size_t kReplicaOrderBytes = 20;
std::string EncodeReplicaOrder(const ReplicaOrder& order, std::string_view args);
// The order and the function's own arguments; INVALID_ARGUMENT if too short.
absl::StatusOr<std::pair<ReplicaOrder, std::string_view>> DecodeReplicaOrder(
    std::string_view args);

class SlotReplication final : public Replication {
 public:
  // `peers` (borrowed) carries forwarded writes to the replicas.
  explicit SlotReplication(PeerCaller* peers);

  // What the slot map says (ardmad, at every map it takes): the members this member's slots are
  // replicated to, and, per slot, whether this member is one of its replicas.
  void SetRoles(std::vector<std::string> replicas, std::vector<bool> replica_of);
  // Replicated writes are refused from `until` on (the membership lease's renewal, less a margin).
  void SetWritableUntil(absl::Time until);

  // Replication.
  absl::StatusOr<Ticket> Order(uint32_t slot) override;
  bool Replicates(uint32_t slot) const override;

  // The primary's side. Sends `function(args)`, which took `ticket` and ran here, to every replica
  // once the slot's earlier writes have been sent; OK when each applied it, else UNAVAILABLE
  // naming the replica (the write was not acknowledged). Every ticket must be forwarded, whatever
  // its run answered here (the replica's run answers the same): the slot's later writes wait for
  // it.
  absl::Status Forward(const Ticket& ticket, std::string_view function, std::string_view args,
                       absl::Time deadline);

  // The replica's side. Whether to apply a forwarded write: true to apply it, false if it was
  // applied already (a retry); FAILED_PRECONDITION if a write before it is missing here.
  absl::StatusOr<bool> Admit(const ReplicaOrder& order);
  // Records that the write `order` was applied.
  void Applied(const ReplicaOrder& order);

  uint64_t incarnation() const { return incarnation_; }

 private:
  struct Mark {  // the last write applied
    uint64_t incarnation = 0;
    uint64_t seq = 0;
  };
  // Waits until the slot's writes before `ticket` were sent; false at `deadline`.
  bool AwaitTurn(const Ticket& ticket, absl::Time deadline);
  void PassTurn(const Ticket& ticket);

  PeerCaller* const peers_;
  const uint64_t incarnation_;
  std::atomic<int64_t> writable_until_ns_;  // absl::ToUnixNanos
  mutable absl::Mutex mu_;
  std::vector<std::string> replicas_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> replica_of_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> issued_ ABSL_GUARDED_BY(mu_);   // per slot: the last seq given out
  std::vector<uint64_t> sent_ ABSL_GUARDED_BY(mu_);     // per slot: the last seq forwarded
  std::vector<Mark> applied_ ABSL_GUARDED_BY(mu_);   // per slot, as a replica
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_SLOT_REPLICATION_H_
