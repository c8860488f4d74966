// What a cluster's administrator does with its configuration in etcd (`ardma cluster ...`):
// list the members, read the slot map, create the first map, plan a rebalance, hold the admin
// lock. Every change of the map is one
// etcd transaction that compares the map's revision, so two admins can never interleave one.
#ifndef ARDMA_CORE_CLUSTER_ADMIN_H_
#define ARDMA_CORE_CLUSTER_ADMIN_H_

#include <memory>
#include <string>
#include <thread>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/cluster/slot.h"

namespace ardma::cluster {

// The live members of cluster `name`, by id.
absl::StatusOr<std::vector<MemberInfo>> ListMembers(EtcdClient& etcd, std::string_view name);

// The slot map and the etcd revision it was written at: NOT_FOUND if the cluster has none,
// INVALID_ARGUMENT (saying what is wrong) if the one there is inconsistent.
struct StoredMap {
  SlotMap map;
  int64_t revision = 0;
};
absl::StatusOr<StoredMap> ReadMap(EtcdClient& etcd, std::string_view name);

// The members and the map from one read of the cluster's keys, with the store revision that read
// reflects (a watch from revision + 1 misses nothing after it). Errors as ReadMap's.
struct ClusterView {
  std::vector<MemberInfo> members;
  StoredMap map;
  int64_t revision = 0;
};
absl::StatusOr<ClusterView> ReadCluster(EtcdClient& etcd, std::string_view name);

// Writes the first map: the slots evenly over `servers` (live members' ids; empty: every live
// member, by id), each server's slots with `replicas` replicas among the others
// (SlotMap::WithReplicas). ALREADY_EXISTS if the cluster has a map, NOT_FOUND naming an id that
// is not a live member, FAILED_PRECONDITION if there is none, INVALID_ARGUMENT for more replicas
// than other servers.
absl::StatusOr<SlotMap> CreateMap(EtcdClient& etcd, std::string_view name,
                                  std::vector<std::string> servers, uint32_t replicas = 0);

// One step of a rebalance: `slots` go from server `from` to server `to`.
struct Move {
  std::string from, to;
  std::vector<uint32_t> slots;  // ascending
};
// The moves that leave the slots evenly over `servers` (ids; the first kSlots % n of them, sorted,
// get one more), moving as few slots as possible: servers over their share give their highest
// slots to servers under theirs; servers of the map not in `servers` give all theirs away.
// INVALID_ARGUMENT if `servers` is empty.
absl::StatusOr<std::vector<Move>> PlanRebalance(const SlotMap& map,
                                                std::vector<std::string> servers);

// The admin lock: one administrator at a time changes a cluster's slots. The key
// /ardma/NAME/admin, created on a lease the holder keeps alive; it ends with the holder (Release,
// or the lease running out if the holder dies). FAILED_PRECONDITION naming the holder if another
// has it.
class AdminLock {
 public:
  static absl::StatusOr<std::unique_ptr<AdminLock>> Acquire(EtcdClient& etcd,
                                                            std::string_view name,
                                                            std::string_view holder);
  ~AdminLock();  // releases
  AdminLock(const AdminLock&) = delete;
  AdminLock& operator=(const AdminLock&) = delete;

 private:
  AdminLock(EtcdClient& etcd, int64_t lease) : etcd_(etcd), lease_(lease) {}
  EtcdClient& etcd_;
  const int64_t lease_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread keeper_;
};

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_ADMIN_H_
