#include "core/cluster/admin.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace ardma::cluster {

absl::StatusOr<std::vector<MemberInfo>> ListMembers(EtcdClient& etcd, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, etcd.GetPrefix(MembersPrefix(name)));
  std::vector<MemberInfo> out;
  for (const KeyValue& kv : kvs) {
    ARDMA_ASSIGN_OR_RETURN(MemberInfo member, MemberInfo::Parse(kv.value));
    out.push_back(std::move(member));
  }
  return out;
}

namespace {

absl::StatusOr<StoredMap> ParseStoredMap(std::string_view name, const std::optional<KeyValue>& kv) {
  if (!kv.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("cluster ", ToAbsl(name), " has no slot map yet (ardma cluster create)"));
  }
  absl::StatusOr<SlotMap> map = SlotMap::Parse(kv->value);
  if (!map.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the slot map of cluster ", ToAbsl(name),
                                                   " is inconsistent: ", map.status().message()));
  }
  return StoredMap{*std::move(map), kv->mod_revision};
}

}  // namespace

absl::StatusOr<StoredMap> ReadMap(EtcdClient& etcd, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd.Get(MapKey(name)));
  return ParseStoredMap(name, kv);
}

absl::StatusOr<ClusterView> ReadCluster(EtcdClient& etcd, std::string_view name) {
  ClusterView view;
  ARDMA_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs,
                         etcd.GetPrefix(ClusterPrefix(name), &view.revision));
  const std::string members = MembersPrefix(name), map_key = MapKey(name);
  std::optional<KeyValue> map;
  for (KeyValue& kv : kvs) {
    if (kv.key == map_key) {
      map = std::move(kv);
    } else if (kv.key.rfind(members, 0) == 0) {
      ARDMA_ASSIGN_OR_RETURN(MemberInfo member, MemberInfo::Parse(kv.value));
      view.members.push_back(std::move(member));
    }
  }
  ARDMA_ASSIGN_OR_RETURN(view.map, ParseStoredMap(name, map));
  return view;
}

absl::StatusOr<SlotMap> CreateMap(EtcdClient& etcd, std::string_view name,
                                  std::vector<std::string> servers, uint32_t replicas) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<MemberInfo> members, ListMembers(etcd, name));
  if (members.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cluster ", ToAbsl(name), " has no live member to give slots to"));
  }
  std::vector<std::string> live;
  for (const MemberInfo& m : members) live.push_back(m.id);
  if (servers.empty()) servers = live;
  for (const std::string& id : servers) {
    if (std::find(live.begin(), live.end(), id) == live.end()) {
      return absl::NotFoundError(absl::StrCat("server ", id, " is not a live member of cluster ",
                                              ToAbsl(name), " (members: ",
                                              absl::StrJoin(live, ", "), ")"));
    }
  }
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  SlotMap map = SlotMap::Even(servers);
  if (replicas > 0) {
    ARDMA_ASSIGN_OR_RETURN(map, map.WithReplicas(replicas));
  }
  ARDMA_ASSIGN_OR_RETURN(bool created, etcd.PutIf(MapKey(name), 0, map.ToJson()));
  if (!created) {
    return absl::AlreadyExistsError(
        absl::StrCat("cluster ", ToAbsl(name), " has a slot map already (see ardma cluster status)"));
  }
  return map;
}

absl::StatusOr<std::vector<Move>> PlanRebalance(const SlotMap& map,
                                                std::vector<std::string> servers) {
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  if (servers.empty()) return absl::InvalidArgumentError("a rebalance needs at least one server");
  const uint32_t n = static_cast<uint32_t>(servers.size());
  std::map<std::string, uint32_t> share;  // what each should own
  for (uint32_t i = 0; i < n; ++i) share[servers[i]] = kSlots / n + (i < kSlots % n ? 1 : 0);
  std::vector<std::string> owners = map.Servers();  // sorted
  std::vector<std::pair<std::string, std::vector<uint32_t>>> surplus;  // server, slots to give
  for (const std::string& owner : owners) {
    std::vector<uint32_t> slots = map.SlotsOf(owner);
    uint32_t keep = share.contains(owner) ? share[owner] : 0;
    if (slots.size() > keep) {
      surplus.push_back({owner, std::vector<uint32_t>(slots.begin() + keep, slots.end())});
    }
  }
  std::vector<Move> moves;
  size_t giver = 0, given = 0;
  for (const std::string& server : servers) {
    uint32_t have = map.SlotCount(server);
    for (uint32_t need = share[server] > have ? share[server] - have : 0; need > 0;) {
      const auto& [from, slots] = surplus[giver];
      uint32_t take = static_cast<uint32_t>(std::min<size_t>(need, slots.size() - given));
      moves.push_back({from, server, std::vector<uint32_t>(slots.begin() + given,
                                                           slots.begin() + given + take)});
      need -= take;
      given += take;
      if (given == slots.size()) {
        ++giver;
        given = 0;
      }
    }
  }
  return moves;
}

absl::StatusOr<std::unique_ptr<AdminLock>> AdminLock::Acquire(EtcdClient& etcd,
                                                              std::string_view name,
                                                              std::string_view holder) {
  constexpr absl::Duration kTtl = absl::Seconds(10);
  ARDMA_ASSIGN_OR_RETURN(int64_t lease, etcd.GrantLease(kTtl));
  const std::string key = absl::StrCat("/ardma/", ToAbsl(name), "/admin");
  absl::StatusOr<bool> taken = etcd.PutIf(key, 0, std::string(holder), lease);
  if (!taken.ok() || !*taken) {
    (void)etcd.RevokeLease(lease);
    ARDMA_RETURN_IF_ERROR(taken.status());
    absl::StatusOr<std::optional<KeyValue>> other = etcd.Get(key);
    return absl::FailedPreconditionError(absl::StrCat(
        "another administrator is changing cluster ", ToAbsl(name),
        other.ok() && other->has_value() ? absl::StrCat(" (", (*other)->value, ")") : "",
        "; try again when it is done"));
  }
  std::unique_ptr<AdminLock> lock(new AdminLock(etcd, lease));
  lock->keeper_ = std::thread([l = lock.get(), kTtl] {
    absl::MutexLock hold(&l->mu_);
    auto done = [l]() ABSL_SHARED_LOCKS_REQUIRED(l->mu_) { return l->done_; };
    while (!l->mu_.AwaitWithTimeout(absl::Condition(&done), kTtl / 4)) {
      (void)l->etcd_.KeepAlive(l->lease_);
    }
  });
  return lock;
}

AdminLock::~AdminLock() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  keeper_.join();
  (void)etcd_.RevokeLease(lease_);
}

}  // namespace ardma::cluster
