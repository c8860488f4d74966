// Member: one ardmad's place in a cluster (docs/cluster.md). It registers the server under
// /ardma/NAME/members/ID in etcd, on a lease it keeps alive (so a server that dies leaves the
// membership within the lease's TTL), and follows the cluster's slot map (/ardma/NAME/map).
//
//   ARDMA_ASSIGN_OR_RETURN(ClusterAddress where, ParseClusterAddress("etcd://127.0.0.1:2379/c1"));
//   ARDMA_ASSIGN_OR_RETURN(auto member, Member::Join({.where = where, .id = "7f3a...",
//                                                     .addresses = {{"tcp", "10.0.0.5:15712"}}}));
#ifndef ARDMA_CORE_CLUSTER_MEMBER_H_
#define ARDMA_CORE_CLUSTER_MEMBER_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/slot.h"

namespace ardma::cluster {

// "etcd://HOST:PORT[,HOST:PORT...]/NAME": where a cluster's configuration lives.
struct ClusterAddress {
  std::string endpoints;  // "HOST:PORT[,HOST:PORT...]"
  std::string name;       // letters, digits, '-' and '_'
};
absl::StatusOr<ClusterAddress> ParseClusterAddress(std::string_view text);
bool IsClusterAddress(std::string_view text);  // starts with "etcd://"

// The keys of cluster `name` in etcd.
std::string ClusterPrefix(std::string_view name);  // "/ardma/NAME/": every key of the cluster
std::string MembersPrefix(std::string_view name);  // "/ardma/NAME/members/"
std::string MapKey(std::string_view name);         // "/ardma/NAME/map"
std::string ControllerKey(std::string_view name);  // "/ardma/NAME/controller": failover's holder
// "/ardma/NAME/synced/": OWNER/REPLICA for each replica whose fill by its owner is complete.
std::string SyncedPrefix(std::string_view name);

// A member as registered: its id and its addresses by transport ("tcp", "unix", "ucx", "tls").
struct MemberInfo {
  std::string id;
  std::map<std::string, std::string> addresses;
  std::string ToJson() const;
  static absl::StatusOr<MemberInfo> Parse(std::string_view json);
};

struct MemberOptions {
  ClusterAddress where;
  MemberInfo self;
  absl::Duration ttl = absl::Seconds(5);            // of the membership lease
  // The slot map is followed by a watch; while etcd is away, watching is tried again this often.
  absl::Duration retry_interval = absl::Milliseconds(200);
  // Called with every newer valid map taken (first in Join, if the cluster has one), on the
  // member's thread: ardmad adopts its slots in its fence (fence.h). Its error is logged.
  std::function<absl::Status(const SlotMap&)> on_map;
  // Called on the member's thread after each registration and renewal of the lease with the time
  // until which the membership is surely still held: when the renewal was sent, plus the TTL,
  // less a third of it (for the clocks and the next renewal's way). A server stops taking
  // replicated writes then (self-fencing: etcd may give its slots to a replica soon after).
  // Not called after the lease lapsed (the member registers again, fenced until it restarts).
  std::function<void(absl::Time)> on_lease;
  // Called on the member's thread when the lease has lapsed (this process was stopped, or etcd
  // was away for the TTL), before registering again; ardmad ends there when its slots have
  // replicas (failover may have given them away: it rejoins fresh, as a replica).
  std::function<void()> on_lapse;
};

class Member {
 public:
  // Registers `self`; ALREADY_EXISTS if a live server holds the id, UNAVAILABLE or
  // FAILED_PRECONDITION (naming the address) if etcd cannot be used.
  static absl::StatusOr<std::unique_ptr<Member>> Join(MemberOptions options);
  ~Member();  // Leave()
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  // The cluster's slot map as last read; null while the cluster has none (or only an invalid
  // one: that is logged and the previous map kept).
  std::shared_ptr<const SlotMap> map() const;
  const MemberInfo& self() const { return options_.self; }
  // How many times the lease has been renewed.
  uint64_t renewals() const { return renewals_.load(std::memory_order_relaxed); }
  // Deregisters at once (the lease is revoked) and stops following the cluster.
  void Leave();

 private:
  Member(MemberOptions options, std::unique_ptr<EtcdClient> etcd)
      : options_(std::move(options)), etcd_(std::move(etcd)) {}
  // Takes a lease and puts the member key on it, unless another live server holds the id.
  absl::Status Register();
  void Run();            // keeps the lease alive and follows the map until Leave
  void ReadMap();
  // on_lease, for a lease of `ttl` left as of `asked`.
  void Held(absl::Time asked, absl::Duration ttl);
  // Reads the map, then watches it from just after that read; null while etcd is away.
  std::unique_ptr<EtcdWatch> WatchMap();
  void ForgetWatch(std::unique_ptr<EtcdWatch>& watch);

  const MemberOptions options_;
  std::unique_ptr<EtcdClient> etcd_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const SlotMap> map_ ABSL_GUARDED_BY(mu_);
  int64_t map_revision_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lease_ = 0;  // the Run thread's, after Join
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  EtcdWatch* watch_ ABSL_GUARDED_BY(mu_) = nullptr;  // Run's, to wake it when leaving
  std::atomic<uint64_t> renewals_{0};
  std::thread thread_;
};

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_MEMBER_H_
