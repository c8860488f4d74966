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
// Failover and filling: a replica takes a slot's writes only in the order of the primary that
// filled it, from the place the fill gave it (its base). A member made the owner of slots it
// replicated orders their writes in its own order from then on, and each of its replicas is
// filled with them first — as a new replica is with every slot, and a replica that missed a
// write with that slot: a copy of the slots with their place in the order (NextFill,
// StreamMarks; SetBase on the replica), made while the slots are frozen
// (services/replica_filler.h).
// Self-fencing: replicated writes are refused once the membership lease may have expired
// (SetWritableUntil), before etcd can hand the slots to another member.
//
// Thread-safe.
#ifndef ARDMA_CORE_SERVER_SLOT_REPLICATION_H_
#define ARDMA_CORE_SERVER_SLOT_REPLICATION_H_

#include <atomic>
#include <map>
#include <optional>
#include <set>
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
// How a replica's refusal of a write after a gap reads (the primary then fills it).
inline constexpr char kMissedWrites[] = "has missed writes";
// A replica's base: the function name of a peer's replica call (wire::kFlagReplica) whose
// arguments are orders alone, each the last write of its slot that a fill's copy holds.
inline constexpr char kReplicaBaseFunction[] = "ardma.replica_base";
std::string EncodeReplicaOrder(const ReplicaOrder& order, std::string_view args);
// The order and the function's own arguments; INVALID_ARGUMENT if too short.
absl::StatusOr<std::pair<ReplicaOrder, std::string_view>> DecodeReplicaOrder(
    std::string_view args);

// kReplicaBaseFunction's arguments: the orders (seq 0: no write of the slot yet).
std::string EncodeReplicaBase(const std::vector<ReplicaOrder>& marks);
absl::StatusOr<std::vector<ReplicaOrder>> DecodeReplicaBase(std::string_view args);

class SlotReplication final : public Replication {
 public:
  // `peers` (borrowed) carries forwarded writes to the replicas.
  explicit SlotReplication(PeerCaller* peers);

  // What the slot map says (ardmad, at every map it takes): the members this member's slots are
  // replicated to, per slot whether this member is one of its replicas, and the slots it owns.
  // Slots it owns now and replicated before (promoted) are to be filled on every replica, and
  // every slot on a replica new to the list (NextFill).
  void SetRoles(std::vector<std::string> replicas, std::vector<bool> replica_of,
                const std::vector<uint32_t>& owned = {});
  // Replicated writes are refused from `until` on (the membership lease's renewal, less a margin).
  void SetWritableUntil(absl::Time until);

  // Replication.
  absl::StatusOr<Ticket> Order(uint32_t slot) override;
  bool Replicates(uint32_t slot) const override;
  bool Fenced() const override;

  // The primary's side. Sends `function(args)`, which took `ticket` and ran here, to every replica
  // once the slot's earlier writes have been sent; OK when each applied it, else UNAVAILABLE
  // naming the replica (the write was not acknowledged). Every ticket must be forwarded, whatever
  // its run answered here (the replica's run answers the same): the slot's later writes wait for
  // it.
  absl::Status Forward(const Ticket& ticket, std::string_view function, std::string_view args,
                       absl::Time deadline);

  // Filling, on the primary. A replica takes a slot's writes only after a fill gave it the slot's
  // copy and base (its place in this member's order); until a slot is filled on every replica
  // that lacks it, its writes are refused with a "frozen" redirect (clients retry), so none is
  // acknowledged by fewer replicas than it should be.
  // A replica and the slots it must be filled with, taken from those waiting (nullopt if none by
  // `deadline`); each taken slot is then reported Filled, or handed back (Unfilled).
  // With `changes` (the filler's): also nullopt as soon as the replicas in sync may have changed
  // since *changes (updated), or Wake() was called — so a filler waits for events, not a clock.
  std::optional<std::pair<std::string, std::vector<uint32_t>>> NextFill(
      absl::Time deadline, uint64_t* changes = nullptr);
  // Ends a wait in NextFill (a filler stopping).
  void Wake();
  void Filled(const std::string& replica, const std::vector<uint32_t>& slots);
  void Unfilled(const std::string& replica, const std::vector<uint32_t>& slots);
  // How many fills wait (for tests and metrics).
  size_t fills_waiting() const;
  // The replicas with no fill waiting or under way: each holds every write of this member's
  // slots that was acknowledged (ardmad records them in etcd; failover promotes only those).
  std::vector<std::string> InSync() const;
  // Waits until every write of `slots` given its order has been forwarded; false at `deadline`.
  bool AwaitForwarded(const std::vector<uint32_t>& slots, absl::Time deadline);
  // The slots' places in their order: the last write given out of each (with the order's
  // incarnation; seq 0 if none). Taken while the slots are frozen, after their copy.
  std::vector<ReplicaOrder> StreamMarks(const std::vector<uint32_t>& slots) const;

  // The replica's side. Whether to apply a forwarded write: true to apply it, false if it was
  // applied already (a retry); FAILED_PRECONDITION if a write before it is missing here, or the
  // slot is not replicated here (any more: a member promoted to its owner takes no write of the
  // old primary).
  absl::StatusOr<bool> Admit(const ReplicaOrder& order);
  // Records that the write `order` was applied.
  void Applied(const ReplicaOrder& order);
  // After a fill: the slot's copy here holds its writes up to `order` (kReplicaBaseFunction).
  void SetBase(const ReplicaOrder& order);

  uint64_t incarnation() const { return incarnation_; }

 private:
  struct Mark {  // the last write applied
    uint64_t incarnation = 0;
    uint64_t seq = 0;
  };
  // Waits until the slot's writes before `ticket` were sent; false at `deadline`.
  bool AwaitTurn(const Ticket& ticket, absl::Time deadline);
  void PassTurn(const Ticket& ticket);
  void AddFill(const std::string& replica, const std::vector<uint32_t>& slots)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillEnded(const std::string& replica, uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (filling_[slot] > 0) --filling_[slot];
    auto it = pending_.find(replica);
    if (it != pending_.end() && it->second > 0 && --it->second == 0) {
      pending_.erase(it);
      ++changes_;  // (a replica in sync now)
    }
  }

  PeerCaller* const peers_;
  const uint64_t incarnation_;
  std::atomic<int64_t> writable_until_ns_;  // absl::ToUnixNanos
  mutable absl::Mutex mu_;
  std::vector<std::string> replicas_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> replica_of_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> owned_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<uint32_t>> unfilled_ ABSL_GUARDED_BY(mu_);  // by replica
  std::vector<uint16_t> filling_ ABSL_GUARDED_BY(mu_);  // per slot: fills waiting or under way
  std::map<std::string, size_t> pending_ ABSL_GUARDED_BY(mu_);  // per replica: the same, in slots
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;  // roles, fills, Wake: what NextFill's caller sees
  std::vector<uint64_t> issued_ ABSL_GUARDED_BY(mu_);   // per slot: the last seq given out
  std::vector<uint64_t> sent_ ABSL_GUARDED_BY(mu_);     // per slot: the last seq forwarded
  std::vector<Mark> applied_ ABSL_GUARDED_BY(mu_);   // per slot, as a replica
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_SLOT_REPLICATION_H_
