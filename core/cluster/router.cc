#include "core/cluster/router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/cluster/admin.h"
#include "core/status_macros.h"

namespace ardma::cluster {

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Connect(std::string_view address,
                                                          Options options) {
  ARDMA_ASSIGN_OR_RETURN(ClusterAddress where, ParseClusterAddress(address));
  // (No probe: the first read below tells etcd from anything else as well.)
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd,
                         EtcdClient::Connect(where.endpoints, absl::Seconds(2), /*probe=*/false));
  std::unique_ptr<Cluster> cluster(
      new Cluster(std::move(where), std::move(options), std::move(etcd)));
  int64_t revision = 0;
  absl::Status first = cluster->Reload(&revision);
  if (absl::IsNotFound(first)) return absl::FailedPreconditionError(first.message());
  ARDMA_RETURN_IF_ERROR(first);
  if (cluster->options_.refresh_interval > absl::ZeroDuration()) {
    cluster->follower_ = std::thread([c = cluster.get(), revision] { c->Follow(revision); });
  }
  return cluster;
}

bool Cluster::WaitUnlessClosing(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto closing = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closing_; };
  mu_.AwaitWithTimeout(absl::Condition(&closing), timeout);
  return closing_;
}

void Cluster::Follow(int64_t revision) {
  const std::string prefix = ClusterPrefix(where_.name);
  for (bool first = true;; first = false) {
    // A watch from just after the revision of the last read: no change falls between the two.
    // (etcd away: the cached members and map stay.)
    if (!first && (WaitUnlessClosing(options_.refresh_interval) || !Reload(&revision).ok())) {
      if (WaitUnlessClosing(absl::ZeroDuration())) return;
      continue;
    }
    absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = etcd_->Watch(prefix, revision + 1);
    if (!watch.ok()) continue;
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      watch_ = watch->get();
    }
    for (;;) {
      absl::StatusOr<int64_t> changed = (*watch)->Next(absl::Seconds(60));
      if (!changed.ok() || WaitUnlessClosing(absl::ZeroDuration())) break;  // start over
      if (*changed != 0) Refresh().IgnoreError();
    }
    absl::MutexLock lock(&mu_);
    watch_ = nullptr;
  }
}

Cluster::~Cluster() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (watch_ != nullptr) watch_->Wake();
  }
  if (follower_.joinable()) follower_.join();
}

absl::Status Cluster::Refresh() {
  int64_t revision = 0;
  return Reload(&revision);
}

absl::Status Cluster::Reload(int64_t* revision) {
  ARDMA_ASSIGN_OR_RETURN(ClusterView view, ReadCluster(*etcd_, where_.name));
  *revision = view.revision;
  StoredMap& stored = view.map;
  std::map<std::string, MemberInfo> by_id;
  for (MemberInfo& m : view.members) by_id[m.id] = std::move(m);
  std::vector<std::pair<Client*, std::string>> gone;  // the clients of members etcd dropped
  {
    absl::MutexLock lock(&mu_);
    bool changed = by_id.size() != members_.size();
    for (const auto& [id, member] : by_id) {
      auto it = members_.find(id);
      changed = changed || it == members_.end() || it->second.addresses != member.addresses;
    }
    for (const auto& [id, member] : members_) {
      auto now = by_id.find(id);
      if (now != by_id.end() && now->second.addresses == member.addresses) continue;
      for (const auto& [transport, address] : member.addresses) {
        if (auto client = clients_.find(address); client != clients_.end()) {
          gone.emplace_back(client->second.get(), id);
        }
      }
    }
    members_ = std::move(by_id);
    if (map_ == nullptr || stored.map.epoch() > map_->epoch()) {
      map_ = std::make_shared<const SlotMap>(std::move(stored.map));
      any_replicas_.store(map_->Replicated(), std::memory_order_relaxed);
      changed = true;
    }
    if (changed) {
      for (uint32_t slot = 0; slot < kSlots; ++slot) {
        routes_[slot].store(nullptr, std::memory_order_relaxed);
      }
    }
  }
  // Calls waiting on a member etcd dropped (a stopped or cut-off server answers nothing) fail now
  // rather than at their timeout: its slots are another member's, or UNAVAILABLE, from here on.
  // (Outside the lock: failing them runs their callbacks.)
  for (const auto& [client, id] : gone) {
    client->Abandon(absl::StrCat("member ", id, " left cluster ", where_.name,
                                 " (etcd dropped it) while the call waited"));
  }
  return absl::OkStatus();
}

std::string Cluster::AddressOf(const std::string& id) const {
  auto member = members_.find(id);
  if (member == members_.end()) return "";
  const std::map<std::string, std::string>& addresses = member->second.addresses;
  for (const std::string& transport : {options_.transport, std::string("tls"), std::string("tcp")}) {
    if (auto it = addresses.find(transport); it != addresses.end()) return it->second;
  }
  return "";
}

absl::StatusOr<Client*> Cluster::ForSlot(uint32_t slot) {
  if (slot >= kSlots) return absl::InvalidArgumentError(absl::StrCat("no slot ", slot));
  if (Client* known = routes_[slot].load(std::memory_order_acquire); known != nullptr) {
    return known;
  }
  std::string owner;
  {
    absl::MutexLock lock(&mu_);
    owner = map_->Owner(slot);
  }
  return Connected(owner, slot);
}

bool Cluster::Replicated(uint32_t slot) {
  // (Every write asks: a map without replicas answers without the lock.)
  if (!any_replicas_.load(std::memory_order_relaxed) || slot >= kSlots) return false;
  absl::MutexLock lock(&mu_);
  return map_->ReplicatesWritesOf(map_->Owner(slot));
}

absl::StatusOr<Client*> Cluster::ForStaleRead(uint32_t slot) {
  if (slot >= kSlots) return absl::InvalidArgumentError(absl::StrCat("no slot ", slot));
  std::vector<std::string> replicas;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& replica : map_->ReplicasOf(map_->Owner(slot))) {
      if (!AddressOf(replica).empty()) replicas.push_back(replica);
    }
  }
  for (const std::string& replica : replicas) {
    absl::StatusOr<Client*> client = Connected(replica, std::nullopt);
    if (client.ok()) return client;
  }
  return ForSlot(slot);
}

absl::StatusOr<Client*> Cluster::ForMember(std::string_view id) {
  return Connected(std::string(id), std::nullopt);
}

absl::StatusOr<Client*> Cluster::Connected(const std::string& id, std::optional<uint32_t> slot) {
  const std::string of_slot = slot.has_value() ? absl::StrCat(" of slot ", *slot) : "";
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    address = AddressOf(id);
    if (address.empty()) {
      return absl::UnavailableError(
          slot.has_value() ? absl::StrCat("slot ", *slot, " belongs to server ", id,
                                          ", which is not a live member of cluster ", where_.name)
                           : absl::StrCat("server ", id, " is not a live member of cluster ",
                                          where_.name));
    }
    if (auto it = clients_.find(address); it != clients_.end()) {
      if (slot.has_value()) routes_[*slot].store(it->second.get(), std::memory_order_release);
      return it->second.get();
    }
  }
  // Connected outside the lock: a slow server does not hold up calls to the others.
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address, options_.client);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("server ", id, " (", address, ")", of_slot, ": ",
                                     client.status().message()));
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = clients_.try_emplace(address, *std::move(client));
  // (Remembered only if the map still names that server: a Refresh may have come between.)
  if (slot.has_value() && map_->Owner(*slot) == id && AddressOf(id) == address) {
    routes_[*slot].store(it->second.get(), std::memory_order_release);
  }
  return it->second.get();  // another thread's if it connected first
}

absl::StatusOr<std::vector<Client*>> Cluster::All() {
  std::vector<uint32_t> firsts;  // one slot of each server
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> seen;
    for (const SlotRange& r : map_->ranges()) {
      if (std::find(seen.begin(), seen.end(), r.server) != seen.end()) continue;
      seen.push_back(r.server);
      firsts.push_back(r.first);
    }
  }
  std::vector<Client*> out;
  for (uint32_t slot : firsts) {
    ARDMA_ASSIGN_OR_RETURN(Client * client, ForSlot(slot));
    out.push_back(client);
  }
  return out;
}

absl::Status Cluster::Redirected(const slots::Redirect& redirect) {
  if (redirect.frozen) return absl::OkStatus();  // the owner stays until the move ends
  if (map()->epoch() >= redirect.epoch) return absl::OkStatus();
  ARDMA_RETURN_IF_ERROR(Refresh());
  uint64_t epoch = map()->epoch();
  if (epoch < redirect.epoch) {
    return absl::UnavailableError(absl::StrCat("slot ", redirect.slot, " moved at epoch ",
                                               redirect.epoch, "; cluster ", where_.name,
                                               "'s map is still at epoch ", epoch));
  }
  return absl::OkStatus();
}

std::shared_ptr<const SlotMap> Cluster::map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

absl::StatusOr<std::unique_ptr<Servers>> ConnectServers(std::string_view address,
                                                        const ClientOptions& options) {
  if (IsClusterAddress(address)) {
    Cluster::Options cluster_options;
    cluster_options.client = options;
    ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> routed,
                           Cluster::Connect(address, cluster_options));
    return std::unique_ptr<Servers>(std::move(routed));
  }
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(address, options));
  return std::unique_ptr<Servers>(std::make_unique<OneServer>(std::move(client)));
}

}  // namespace ardma::cluster
