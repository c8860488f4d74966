// Slots: every key of every service belongs to one of kSlots slots by a stable hash, and the slot
// map says which server owns each slot (docs/cluster.md). The map lives in etcd as JSON:
//
//   {"epoch": 7, "ranges": [{"first": 0, "last": 8191, "server": "s1"},
//                           {"first": 8192, "last": 16383, "server": "s2"}],
//    "replicas": {"s1": ["s2"], "s2": ["s1"]}, "replication": 1}
//
// Its epoch grows with every change; a valid map gives every slot exactly one owner. "replicas"
// (absent: none) names, for an owner, the servers that keep a copy of all its slots (as Redis
// Cluster gives replicas to a master, not to a slot); "replication" (absent: 0) is how many each
// owner should have, which failover restores when members come back (FailedOver).
#ifndef ARDMA_CORE_CLUSTER_SLOT_H_
#define ARDMA_CORE_CLUSTER_SLOT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/slots.h"

namespace ardma::cluster {

using slots::kSlots;
using slots::Crc16;
using slots::SlotOf;  // core/slots.h: the slot of a key

struct SlotRange {
  uint32_t first = 0;
  uint32_t last = 0;  // inclusive
  std::string server;
  bool operator==(const SlotRange&) const = default;
};

class SlotMap {
 public:
  SlotMap() = default;
  // Every slot to `server`, at epoch 1.
  static SlotMap AllTo(std::string server);
  // The slots in `servers.size()` contiguous ranges of (nearly) equal size, in the order given,
  // at `epoch`. `servers` must not be empty.
  static SlotMap Even(const std::vector<std::string>& servers, uint64_t epoch = 1);
  // Parses and validates the JSON form; INVALID_ARGUMENT naming what is wrong (a slot with no
  // owner or two, a range out of order or out of bounds, a missing field).
  static absl::StatusOr<SlotMap> Parse(std::string_view json);
  std::string ToJson() const;

  uint64_t epoch() const { return epoch_; }
  const std::vector<SlotRange>& ranges() const { return ranges_; }
  // The owner of `slot` (< kSlots) in a valid map.
  const std::string& Owner(uint32_t slot) const;
  // The servers that own at least one slot, sorted.
  std::vector<std::string> Servers() const;
  // How many slots `server` owns.
  uint32_t SlotCount(std::string_view server) const;

  // The map with slots [first, last] given to `server`, at the next epoch; adjacent ranges of one
  // server merge.
  SlotMap WithRange(uint32_t first, uint32_t last, const std::string& server) const;
  // The map with each of `slots` given to `server`, at the next epoch.
  SlotMap WithSlots(const std::vector<uint32_t>& slots, const std::string& server) const;
  // The slots `server` owns, ascending.
  std::vector<uint32_t> SlotsOf(std::string_view server) const;

  // Every owner's replicas (owners without any are not listed).
  const std::map<std::string, std::vector<std::string>>& replicas() const { return replicas_; }
  // The replicas of `server`'s slots; empty if none.
  std::vector<std::string> ReplicasOf(std::string_view server) const;
  // Per slot (kSlots of them): whether `server` is one of the replicas of the slot's owner.
  std::vector<bool> SlotsReplicatedOn(std::string_view server) const;
  // The same map (and epoch) with each owner's replicas the `count` owners after it in id order,
  // wrapping around. INVALID_ARGUMENT unless count < the number of owners.
  absl::StatusOr<SlotMap> WithReplicas(uint32_t count) const;
  // How many replicas each owner should have (WithReplicas' count).
  uint32_t replication() const { return replication_; }
  // Whether the cluster replicates writes at all, and those of `owner`'s slots: in a cluster
  // with a replication count, also while an owner has no live replica left (its writes keep
  // their order for the replica placed next; one-sided writes stay refused).
  bool Replicated() const { return replication_ != 0 || !replicas_.empty(); }
  bool ReplicatesWritesOf(std::string_view owner) const {
    return replication_ != 0 || replicas_.contains(std::string(owner));
  }

  // Failover (docs/cluster.md, "Failover"): the map at the next epoch for the members `live`, or
  // nullopt if it stays as it is. An owner that is not live gives its slots to its first live
  // replica (the promoted member continues the slots' order of writes, so its copy is whole);
  // replicas that are not live are dropped; a live member that neither owns nor replicates
  // anything becomes a replica of the owner with the fewest (below `replication()`), to be
  // filled. An owner without a live replica keeps its slots (they stay down until it returns).
  // With `synced` (pairs of owner and replica whose fill is complete), only such a replica is
  // promoted: one still being filled lacks some of the owner's writes.
  using Pairs = std::set<std::pair<std::string, std::string>>;
  std::optional<SlotMap> FailedOver(const std::set<std::string>& live,
                                    const Pairs* synced = nullptr) const;

 private:
  using Replicas = std::map<std::string, std::vector<std::string>>;
  SlotMap(uint64_t epoch, std::vector<SlotRange> ranges, Replicas replicas = {},
          uint32_t replication = 0)
      : epoch_(epoch),
        ranges_(std::move(ranges)),
        replicas_(std::move(replicas)),
        replication_(replication) {}
  static absl::Status Validate(const std::vector<SlotRange>& ranges);
  static absl::Status ValidateReplicas(const Replicas& replicas);
  // The replicas of the owners in `ranges` (an owner that owns nothing any more keeps none).
  Replicas KeptFor(const std::vector<SlotRange>& ranges) const;

  uint64_t epoch_ = 0;
  std::vector<SlotRange> ranges_;  // sorted, covering every slot once
  Replicas replicas_;              // by owner; no empty lists
  uint32_t replication_ = 0;
};

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_SLOT_H_
