// Cluster: a client of a whole cluster (docs/cluster.md). It reads the cluster's members and slot
// map from etcd, keeps them (calls go on working on the cached map while etcd is away) and reads
// them again on every change a watch reports, keeps one Client per server it has needed, and
// hands out the client of the server that owns a slot. A server that died is known as soon as
// etcd drops it (its lease's TTL): its slots are then UNAVAILABLE at once, naming it, and calls
// still waiting on it (a stopped server answers nothing) fail then too (Client::Abandon); a
// server that comes back (at its old address or a new one) is used again.
//
//   ARDMA_ASSIGN_OR_RETURN(auto cluster, Cluster::Connect("etcd://127.0.0.1:2379/c1"));
//   ARDMA_ASSIGN_OR_RETURN(Client* owner, cluster->ForKey("sessions", "alice"));
//
// Thread-safe; the Clients it hands out live as long as the Cluster.
#ifndef ARDMA_CORE_CLUSTER_ROUTER_H_
#define ARDMA_CORE_CLUSTER_ROUTER_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/client/client.h"
#include "core/client/servers.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/cluster/slot.h"

namespace ardma::cluster {

class Cluster final : public Servers {
 public:
  struct Options {
    ClientOptions client;  // for every server's Client
    // The members' address to use: "tcp", "unix", "ucx" or "tls"; a member without it is reached
    // over tls, else tcp.
    std::string transport = "tcp";
    // Zero: the members and the map are read only by Refresh(). Else a follower thread reads them
    // again on every change etcd reports (a watch on the cluster's keys), and waits this long
    // before it tries again when etcd is away.
    absl::Duration refresh_interval = absl::Milliseconds(500);
  };
  // `address`: etcd://HOST:PORT[,...]/NAME. UNAVAILABLE if etcd cannot be reached,
  // FAILED_PRECONDITION if the cluster has no slot map, INVALID_ARGUMENT for an inconsistent one.
  static absl::StatusOr<std::unique_ptr<Cluster>> Connect(std::string_view address,
                                                          Options options);
  static absl::StatusOr<std::unique_ptr<Cluster>> Connect(std::string_view address) {
    return Connect(address, Options());
  }

  // The client of the server that owns `slot` (< kSlots) by the cached map, connected on first
  // use. UNAVAILABLE naming the server if it is not a live member (as last read) or cannot be
  // reached.
  absl::StatusOr<Client*> ForSlot(uint32_t slot) override;
  // The client of member `id`, connected on first use; UNAVAILABLE naming it if it is not a live
  // member (as last read) or cannot be reached.
  absl::StatusOr<Client*> ForMember(std::string_view id);
  absl::StatusOr<Client*> ForKey(std::string_view space, std::string_view key) {
    return ForSlot(SlotOf(space, key));
  }
  // Servers: the same as ForKey; All() is every server that owns slots.
  absl::StatusOr<Client*> For(std::string_view space, std::string_view key) override {
    return ForKey(space, key);
  }
  absl::StatusOr<std::vector<Client*>> All() override;
  // Reads the map again; UNAVAILABLE while etcd does not have the redirect's epoch yet (the mover
  // marks a slot moved just before it publishes the map).
  absl::Status Redirected(const slots::Redirect& redirect) override;
  // Whether the map gives the owner of `slot` replicas.
  bool Replicated(uint32_t slot) override;
  // The first of the owner's replicas (in the map's order) that is a live member, else the owner.
  absl::StatusOr<Client*> ForStaleRead(uint32_t slot) override;
  // Reads the members and the map again (after a redirect, or a server that went away). If etcd
  // cannot be read the cached ones stay and the error is returned.
  absl::Status Refresh();

  std::shared_ptr<const SlotMap> map() const;
  const ClusterAddress& where() const { return where_; }

  ~Cluster() override;

 private:
  Cluster(ClusterAddress where, Options options, std::unique_ptr<EtcdClient> etcd)
      : where_(std::move(where)), options_(std::move(options)), etcd_(std::move(etcd)) {}
  // The client of member `id` (the owner of `slot`, if given: the route is remembered).
  absl::StatusOr<Client*> Connected(const std::string& id, std::optional<uint32_t> slot);
  // The address of member `id` in the chosen transport; empty if it is not a live member.
  std::string AddressOf(const std::string& id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Refresh, giving the store revision the read reflects.
  absl::Status Reload(int64_t* revision);
  // The follower thread, until the destructor: watches from `revision` + 1 (that of the read
  // Connect made), reading again only after the watch broke.
  void Follow(int64_t revision);
  // Waits up to `timeout`; true once the Cluster is closing.
  bool WaitUnlessClosing(absl::Duration timeout);


  const ClusterAddress where_;
  const Options options_;
  std::unique_ptr<EtcdClient> etcd_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const SlotMap> map_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> any_replicas_{false};  // map_ names replicas (set with it)
  std::map<std::string, MemberInfo> members_ ABSL_GUARDED_BY(mu_);       // by id
  // By address. A server's Client stays while the Cluster lives (callers may hold it), also after
  // the server moved to another address.
  std::map<std::string, std::unique_ptr<Client>> clients_ ABSL_GUARDED_BY(mu_);
  // The client of each slot once looked up (null: not yet), forgotten when the map or the
  // members change: the fast path of ForSlot, read without the lock (a Client outlives the
  // Cluster's use of it, see clients_), written under it.
  const std::unique_ptr<std::atomic<Client*>[]> routes_ =
      std::make_unique<std::atomic<Client*>[]>(kSlots);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  EtcdWatch* watch_ ABSL_GUARDED_BY(mu_) = nullptr;  // the follower's, to wake it when closing
  std::thread follower_;
};

// What a service client is built on, from any address a tool or application is given: a cluster's
// (etcd://HOST:PORT[,...]/NAME: a Cluster whose servers' clients use `options`), or one server's
// (a Client of it with `options`, in a OneServer that owns it).
absl::StatusOr<std::unique_ptr<Servers>> ConnectServers(std::string_view address,
                                                        const ClientOptions& options);

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_ROUTER_H_
