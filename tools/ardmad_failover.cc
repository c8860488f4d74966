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
  Controller(const FailoverOptions& options, Failover::Waker& waker)
      : options_(options), waker_(waker) {}
  ~Controller() {
    // Let another member take over at once rather than after the lease's TTL.
    if (etcd_ != nullptr && lease_ != 0) (void)etcd_->RevokeLease(lease_);
  }

  absl::Status Turn() {
    if (etcd_ == nullptr) {
      ARDMA_ASSIGN_OR_RETURN(etcd_, cluster::EtcdClient::Connect(options_.where.endpoints,
                                                                 absl::Seconds(2), false));
    }
    if (holder_) ARDMA_RETURN_IF_ERROR(HoldLease());
    if (!holder_) {
      const std::string key = cluster::ControllerKey(options_.where.name);
      int64_t revision = 0;
      ARDMA_ASSIGN_OR_RETURN(std::vector<cluster::KeyValue> held,
                             etcd_->GetPrefix(key, &revision));
      if (!held.empty()) {
        // Another member holds it: wait for its key to go (its lease lapsed, it left), holding
        // no lease meanwhile.
        if (watch_ == nullptr) {
          absl::StatusOr<std::unique_ptr<cluster::EtcdWatch>> watch =
              etcd_->Watch(key, revision + 1);
          if (watch.ok()) watch_ = *std::move(watch);
        }
        return absl::OkStatus();
      }
      ARDMA_RETURN_IF_ERROR(HoldLease());
      ARDMA_ASSIGN_OR_RETURN(holder_, etcd_->PutIf(key, 0, options_.self, lease_));
      if (!holder_) {  // another was quicker
        (void)etcd_->RevokeLease(lease_);
        lease_ = 0;
        return absl::OkStatus();
      }
      watch_.reset();  // (the holder watches the cluster's keys instead)
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

  // Until the next turn: until what it watches changes (the holder: the cluster's keys; another
  // member: the controller key) or its lease is to be renewed; Failover::Stop wakes it. Without
  // a watch (etcd away), the options' interval.
  void Await(absl::Notification& stop) {
    if (watch_ == nullptr) {
      stop.WaitForNotificationWithTimeout(options_.interval);
      return;
    }
    waker_.Set(watch_.get());
    while (!stop.HasBeenNotified()) {
      const absl::Duration left =
          holder_ ? renew_at_ - absl::Now() : absl::InfiniteDuration();  // (only it renews)
      if (left <= absl::ZeroDuration()) break;
      absl::StatusOr<int64_t> changed = watch_->Next(left);
      if (!changed.ok()) {
        waker_.Set(nullptr);
        watch_.reset();
        return;
      }
      if (*changed != 0) break;
    }
    waker_.Set(nullptr);
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
  Failover::Waker& waker_;
  std::unique_ptr<cluster::EtcdClient> etcd_;
  // The holder's, of the cluster's keys; another member's, of the controller key.
  std::unique_ptr<cluster::EtcdWatch> watch_;
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
            absl::Status synced = RecordInSync();
            if (!synced.ok()) {
              ARDMA_LOG(kWarning, "recording the replicas in sync: %s", synced.ToString());
            }
            return synced;
          },
  });
}

Failover::~Failover() { Stop(); }

void Failover::Waker::Set(cluster::EtcdWatch* watch) {
  absl::MutexLock lock(&mu);
  waiting = watch;
}

void Failover::Waker::Wake() {
  absl::MutexLock lock(&mu);
  if (waiting != nullptr) waiting->Wake();
}

void Failover::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  waker_.Wake();
  if (controller_.joinable()) controller_.join();
  if (filler_ != nullptr) filler_->Stop();
}

void Failover::Control() {
  Controller controller(options_, waker_);
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
