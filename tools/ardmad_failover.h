// Failover and filling, for an ardmad that is a member of a cluster whose slots have replicas
// (docs/cluster.md, "Failover").
//
// Controller: every member competes for the key /ardma/NAME/controller, held on a lease of its
// own (one holder at a time: etcd's transaction puts it only where it is absent). The holder
// reads the live members and the map and, when they disagree (SlotMap::FailedOver: an owner or a
// replica gone, a member back), writes the next map compared on the map's revision. A member
// whose lease lapsed has fenced itself before (SlotReplication::SetWritableUntil), so the
// promoted replica is the only primary that acknowledges writes of those slots.
//
// Only a replica whose owner has filled it is promoted: each owner records its replicas in sync
// under /ardma/NAME/synced/OWNER/REPLICA (deleted before a fill starts: a new replica is never
// there until its fill ends).
//
// Filler: this member, as a primary, copies slots to a replica that lacks them (a replica new to
// its list, its replicas after it was promoted, a replica that refused a write after a gap):
// a batch of slots at a time, frozen meanwhile (clients retry: writes of other slots go on), it
// purges them on the replica, copies their keys table by table, then gives the replica the
// slots' places in their order (kReplicaBaseFunction), and serves them again.
#ifndef ARDMA_TOOLS_ARDMAD_FAILOVER_H_
#define ARDMA_TOOLS_ARDMAD_FAILOVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/cluster/peer_calls.h"
#include "core/server/server.h"
#include "core/server/slot_replication.h"

namespace ardma {

struct FailoverOptions {
  cluster::ClusterAddress where;
  std::string self;  // this member's id
  absl::Duration ttl = absl::Seconds(5);  // of the controller's lease (as the members')
  // How often the controller compares the members with the map when it cannot watch them, and
  // waits after an error.
  absl::Duration interval = absl::Milliseconds(100);
  Server* server = nullptr;                   // borrowed: this member's
  cluster::PeerCalls* peers = nullptr;        // borrowed: reaches the replicas and this member
  SlotReplication* replication = nullptr;     // borrowed
};

class Failover {
 public:
  explicit Failover(FailoverOptions options);
  ~Failover();  // Stop()
  Failover(const Failover&) = delete;
  Failover& operator=(const Failover&) = delete;
  void Stop();

 private:
  void Control();  // the controller's thread
  void Fill();     // the filler's thread
  // Fills `replica` with `slots` of this member; what could not be filled is handed back.
  absl::Status FillReplica(const std::string& replica, const std::vector<uint32_t>& slots);
  // Puts /ardma/NAME/synced/SELF/REPLICA for the replicas now in sync, deletes it for those no
  // longer; `recorded`: what is there.
  absl::Status RecordInSync(std::unique_ptr<cluster::EtcdClient>& etcd,
                            std::vector<std::string>& recorded);
  // Copies `slots` (frozen here) to `replica`, and gives it their places in their order.
  absl::Status CopyFrozen(const std::string& replica, const std::vector<uint32_t>& slots);

  const FailoverOptions options_;
  absl::Notification stop_;
  std::thread controller_, filler_;
};

}  // namespace ardma

#endif  // ARDMA_TOOLS_ARDMAD_FAILOVER_H_
