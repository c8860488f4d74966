// ReplicaFiller: a cluster member's filling of its replicas (docs/cluster.md, "Failover"). As a
// primary, a member copies slots to a replica that lacks them — a replica new to its list, its
// replicas after it was promoted, a replica that refused a write after a gap
// (SlotReplication::NextFill) — a batch of slots at a time, frozen meanwhile (clients retry:
// writes of other slots go on): it purges them on the replica, copies their keys table by table
// (the DHT mover's export and import), then gives the replica the slots' places in their order
// (kReplicaBaseFunction), and serves them again. Until then the replica takes none of their
// writes, and the slots take none.
//
// ardmad runs one per member (tools/ardmad_failover.h); so do tests of in-process clusters.
#ifndef ARDMA_SERVICES_REPLICA_FILLER_H_
#define ARDMA_SERVICES_REPLICA_FILLER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "core/cluster/peer_calls.h"
#include "core/server/server.h"
#include "core/server/slot_replication.h"

namespace ardma {

struct ReplicaFillerOptions {
  std::string self;                        // this member's id
  Server* server = nullptr;                // borrowed: this member's
  cluster::PeerCalls* peers = nullptr;     // borrowed: reaches the replicas and this member
  SlotReplication* replication = nullptr;  // borrowed
  // Run by the filler's thread before each wait for a fill and whenever the replicas in sync may
  // have changed (ardmad records them in etcd there); an error has it run again 0.5 s later. May
  // be empty.
  std::function<absl::Status()> each_turn;
};

class ReplicaFiller {
 public:
  explicit ReplicaFiller(ReplicaFillerOptions options);  // starts its thread
  ~ReplicaFiller();                                      // Stop()
  ReplicaFiller(const ReplicaFiller&) = delete;
  ReplicaFiller& operator=(const ReplicaFiller&) = delete;
  void Stop();

 private:
  void Run();
  // Fills `replica` with `slots` of this member; what could not be filled is handed back.
  absl::Status FillReplica(const std::string& replica, const std::vector<uint32_t>& slots);
  // Copies `slots` (frozen here) to `replica`, and gives it their places in their order.
  absl::Status CopyFrozen(const std::string& replica, const std::vector<uint32_t>& slots);

  const ReplicaFillerOptions options_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace ardma

#endif  // ARDMA_SERVICES_REPLICA_FILLER_H_
