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
// Filler: this member, as a primary, copies slots to a replica that lacks them
// (services/replica_filler.h), and records which replicas are in sync.
#ifndef ARDMA_TOOLS_ARDMAD_FAILOVER_H_
#define ARDMA_TOOLS_ARDMAD_FAILOVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/cluster/peer_calls.h"
#include "core/server/server.h"
#include "core/server/slot_replication.h"
#include "services/replica_filler.h"

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

  // The watch the controller waits on, for Stop to wake.
  struct Waker {
    void Set(cluster::EtcdWatch* watch);
    void Wake();
    absl::Mutex mu;
    cluster::EtcdWatch* waiting ABSL_GUARDED_BY(mu) = nullptr;
  };

 private:
  void Control();  // the controller's thread
  // Puts /ardma/NAME/synced/SELF/REPLICA for the replicas now in sync, deletes it for those no
  // longer (on the filler's thread).
  absl::Status RecordInSync();

  const FailoverOptions options_;
  absl::Notification stop_;
  Waker waker_;
  std::thread controller_;
  std::unique_ptr<cluster::EtcdClient> etcd_;  // RecordInSync's
  std::vector<std::string> recorded_;          // the replicas recorded in sync in etcd
  std::unique_ptr<ReplicaFiller> filler_;      // (last: its thread uses the above)
};

}  // namespace ardma

#endif  // ARDMA_TOOLS_ARDMAD_FAILOVER_H_
