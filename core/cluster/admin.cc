#include "core/cluster/admin.h"

#include <algorithm>

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

absl::StatusOr<StoredMap> ReadMap(EtcdClient& etcd, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd.Get(MapKey(name)));
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

absl::StatusOr<SlotMap> CreateMap(EtcdClient& etcd, std::string_view name,
                                  std::vector<std::string> servers) {
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
  ARDMA_ASSIGN_OR_RETURN(bool created, etcd.PutIf(MapKey(name), 0, map.ToJson()));
  if (!created) {
    return absl::AlreadyExistsError(
        absl::StrCat("cluster ", ToAbsl(name), " has a slot map already (see ardma cluster status)"));
  }
  return map;
}

}  // namespace ardma::cluster
