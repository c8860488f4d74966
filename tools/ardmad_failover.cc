#include "tools/ardmad_failover.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cluster/admin.h"
#include "core/cluster/etcd_client.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

// One turn of the controller: becomes (or stays) the holder of the controller key, and if it is,
// writes the map the live members call for.
class Controller {
 public:
  explicit Controller(const FailoverOptions& options) : options_(options) {}
  ~Controller() {
    // Let another member take over at once rather than after the lease's TTL.
    if (etcd_ != nullptr && lease_ != 0) (void)etcd_->RevokeLease(lease_);
  }

  absl::Status Turn() {
    if (etcd_ == nullptr) {
      ARDMA_ASSIGN_OR_RETURN(etcd_, cluster::EtcdClient::Connect(options_.where.endpoints,
                                                                 absl::Seconds(2), false));
    }
    ARDMA_RETURN_IF_ERROR(HoldLease());
    if (!holder_) {
      ARDMA_ASSIGN_OR_RETURN(holder_, etcd_->PutIf(cluster::ControllerKey(options_.where.name), 0,
                                                   options_.self, lease_));
      if (!holder_) return absl::OkStatus();
      ARDMA_LOG(kInfo, "this member is the controller of cluster %s (failover)",
                options_.where.name);
    }
    ARDMA_ASSIGN_OR_RETURN(cluster::ClusterView view,
                           cluster::ReadCluster(*etcd_, options_.where.name));
    if (watch_ == nullptr) {
      // The holder waits for the cluster's keys to change (polling if it cannot watch).
      absl::StatusOr<std::unique_ptr<cluster::EtcdWatch>> watch =
          etcd_->Watch(cluster::ClusterPrefix(options_.where.name), view.revision + 1);
      if (watch.ok()) watch_ = *std::move(watch);
    }
    const cluster::SlotMap& map = view.map.map;
    if (!map.Replicated()) return absl::OkStatus();
    std::set<std::string> live;
    for (const cluster::MemberInfo& m : view.members) live.insert(m.id);
    // The replicas their owners have filled. A pair is forgotten once its replica is gone (one
    // that comes back is filled again before it counts) or its owner owns nothing (failover took
    // its slots); a dead owner's pairs are what promotes its replica.
    const std::string synced_prefix = cluster::SyncedPrefix(options_.where.name);
    ARDMA_ASSIGN_OR_RETURN(std::vector<cluster::KeyValue> marks, etcd_->GetPrefix(synced_prefix));
    cluster::SlotMap::Pairs synced;
    for (const cluster::KeyValue& kv : marks) {
      const std::string pair = kv.key.substr(synced_prefix.size());
      const size_t slash = pair.find('/');
      if (slash == std::string::npos) continue;
      std::string owner = pair.substr(0, slash), replica = pair.substr(slash + 1);
      if (live.contains(replica) && map.SlotCount(owner) > 0) {
        synced.emplace(std::move(owner), std::move(replica));
      } else if (absl::Status gone = etcd_->Delete(kv.key); !gone.ok()) {
        return gone;
      }
    }
    std::optional<cluster::SlotMap> next = map.FailedOver(live, &synced);
    if (!next.has_value()) return absl::OkStatus();
    // Written only if no member registered since the read: a member that came back meanwhile
    // (from its memory file, with its id) has read the map as it was, and serves its slots.
    const std::string members = cluster::MembersPrefix(options_.where.name);
    ARDMA_ASSIGN_OR_RETURN(
        bool written,
        etcd_->PutIf(cluster::MapKey(options_.where.name), view.map.revision, next->ToJson(),
                     cluster::EtcdClient::Unchanged{members, view.revision}));
    if (written) {
      std::vector<std::string> changes;
      for (const std::string& owner : map.Servers()) {
        if (!live.contains(owner) && next->SlotCount(owner) == 0) {
          const std::string& heir = next->Owner(map.SlotsOf(owner).front());
          changes.push_back(absl::StrCat(owner, "'s slots to ", heir));
        }
      }
      for (const auto& [owner, replicas] : next->replicas()) {
        if (replicas != map.ReplicasOf(owner)) {
          changes.push_back(absl::StrCat(owner, "'s replicas: ", absl::StrJoin(replicas, ",")));
        }
      }
      ARDMA_LOG(kInfo, "failover: slot map epoch %d for the live members %s: %s", next->epoch(),
                absl::StrJoin(live, ","), absl::StrJoin(changes, "; "));
    }
    return absl::OkStatus();
  }

  // Until the next turn: the holder until the cluster's keys change or its lease is to be
  // renewed; another member a quarter of the TTL (the holder's key outlives it by no more than
  // the TTL).
  void Await(absl::Notification& stop) {
    if (!holder_ || watch_ == nullptr) {
      stop.WaitForNotificationWithTimeout(holder_ ? options_.interval : options_.ttl / 4);
      return;
    }
    while (!stop.HasBeenNotified()) {
      const absl::Duration left = renew_at_ - absl::Now();
      if (left <= absl::ZeroDuration()) return;
      absl::StatusOr<int64_t> changed = watch_->Next(std::min(left, absl::Milliseconds(250)));
      if (!changed.ok()) {
        watch_.reset();
        return;
      }
      if (*changed != 0) return;
    }
  }

 private:
  // A lease of the controller's own, renewed a third of the TTL before it would lapse; a lapsed
  // one (this process was stopped, or etcd away) gives up the key.
  absl::Status HoldLease() {
    const absl::Time now = absl::Now();
    if (lease_ != 0 && now < renew_at_) return absl::OkStatus();
    if (lease_ != 0) {
      absl::StatusOr<absl::Duration> left = etcd_->KeepAlive(lease_);
      if (left.ok()) {
        renew_at_ = now + *left / 3;
        return absl::OkStatus();
      }
      if (!absl::IsNotFound(left.status())) return left.status();
      if (holder_) {
        ARDMA_LOG(kWarning, "the controller's lease of cluster %s lapsed: competing again",
                  options_.where.name);
      }
      lease_ = 0;
      holder_ = false;
      watch_.reset();
    }
    ARDMA_ASSIGN_OR_RETURN(lease_, etcd_->GrantLease(options_.ttl));
    renew_at_ = now + options_.ttl / 3;
    return absl::OkStatus();
  }

  const FailoverOptions& options_;
  std::unique_ptr<cluster::EtcdClient> etcd_;
  std::unique_ptr<cluster::EtcdWatch> watch_;  // the holder's, of the cluster's keys
  int64_t lease_ = 0;
  absl::Time renew_at_;
  bool holder_ = false;
};

}  // namespace

Failover::Failover(FailoverOptions options) : options_(std::move(options)) {
  controller_ = std::thread([this] { Control(); });
  filler_ = std::make_unique<ReplicaFiller>(ReplicaFillerOptions{
      .self = options_.self,
      .server = options_.server,
      .peers = options_.peers,
      .replication = options_.replication,
      // Records in etcd which replicas hold all of this member's acknowledged writes.
      .each_turn =
          [this] {
            if (absl::Status synced = RecordInSync(); !synced.ok()) {
              ARDMA_LOG(kWarning, "recording the replicas in sync: %s", synced.ToString());
            }
          },
  });
}

Failover::~Failover() { Stop(); }

void Failover::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (controller_.joinable()) controller_.join();
  if (filler_ != nullptr) filler_->Stop();
}

void Failover::Control() {
  Controller controller(options_);
  absl::Status last;
  while (!stop_.HasBeenNotified()) {
    absl::Status status = controller.Turn();
    if (!status.ok() && status.ToString() != last.ToString()) {
      ARDMA_LOG(kWarning, "failover controller: %s", status.ToString());
    }
    last = status;
    if (status.ok()) {
      controller.Await(stop_);
    } else {
      stop_.WaitForNotificationWithTimeout(options_.interval);
    }
  }
}

absl::Status Failover::RecordInSync() {
  std::vector<std::string> in_sync = options_.replication->InSync();
  std::sort(in_sync.begin(), in_sync.end());
  if (in_sync == recorded_) return absl::OkStatus();
  if (etcd_ == nullptr) {
    ARDMA_ASSIGN_OR_RETURN(etcd_, cluster::EtcdClient::Connect(options_.where.endpoints,
                                                               absl::Seconds(2), false));
  }
  const std::string prefix =
      absl::StrCat(cluster::SyncedPrefix(options_.where.name), options_.self, "/");
  // Out of sync first: failover must never promote a replica that lacks a write.
  for (const std::string& replica : recorded_) {
    if (!std::binary_search(in_sync.begin(), in_sync.end(), replica)) {
      ARDMA_RETURN_IF_ERROR(etcd_->Delete(prefix + replica));
    }
  }
  for (const std::string& replica : in_sync) {
    if (!std::binary_search(recorded_.begin(), recorded_.end(), replica)) {
      ARDMA_RETURN_IF_ERROR(etcd_->Put(prefix + replica, ""));
    }
  }
  recorded_ = std::move(in_sync);
  return absl::OkStatus();
}

}  // namespace ardma
