// What a cluster's administrator does with its configuration in etcd (`ardma cluster ...`):
// list the members, read the slot map, create the first map. Every change of the map is one
// etcd transaction that compares the map's revision, so two admins can never interleave one.
#ifndef ARDMA_CORE_CLUSTER_ADMIN_H_
#define ARDMA_CORE_CLUSTER_ADMIN_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
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

// Writes the first map: the slots evenly over `servers` (live members' ids; empty: every live
// member, by id). ALREADY_EXISTS if the cluster has a map, NOT_FOUND naming an id that is not a
// live member, FAILED_PRECONDITION if there is none.
absl::StatusOr<SlotMap> CreateMap(EtcdClient& etcd, std::string_view name,
                                  std::vector<std::string> servers);

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_ADMIN_H_
