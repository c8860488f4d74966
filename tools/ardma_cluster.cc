// `ardma cluster create|status`: a cluster's membership and slot map in etcd (docs/cluster.md),
// for people at a shell (the moves, add|remove|rebalance, are in ardma_rebalance.cc). --server names the cluster: etcd://HOST:PORT[,...]/NAME.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/cluster/admin.h"
#include "core/status_macros.h"
#include "services/dht/dht_mover.h"
#include "services/lock/lock_format.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

// "tcp 127.0.0.1:4000  ucx ucx://127.0.0.1:4000"
std::string Addresses(const cluster::MemberInfo& m) {
  std::vector<std::string> parts;
  for (const auto& [transport, address] : m.addresses) parts.push_back(transport + " " + address);
  return absl::StrJoin(parts, "  ");
}

// "0-8191" (or "0-99,200-8191") and the number of slots.
std::string Ranges(const cluster::SlotMap& map, const std::string& id) {
  std::vector<std::string> parts;
  for (const cluster::SlotRange& r : map.ranges()) {
    if (r.server == id) parts.push_back(absl::StrCat(r.first, "-", r.last));
  }
  return parts.empty() ? "no slots" : absl::StrCat(absl::StrJoin(parts, ","), " (",
                                                   map.SlotCount(id), " slots)");
}

// "  replicas b, c" for a server whose slots have replicas; else "".
std::string ReplicaText(const cluster::SlotMap& map, const std::string& id) {
  std::vector<std::string> replicas = map.ReplicasOf(id);
  if (replicas.empty()) return "";
  return absl::StrCat(replicas.size() == 1 ? "  replica " : "  replicas ",
                      absl::StrJoin(replicas, ", "));
}

// "1234 keys" (the DHT's, over its tables), or why the server could not say.
std::string KeyCount(const cluster::MemberInfo& m) {
  auto address = m.addresses.find("tcp");
  if (address == m.addresses.end()) address = m.addresses.find("tls");
  if (address == m.addresses.end()) return "keys: no tcp address";
  ClientOptions options;
  options.connect_attempts = 1;
  options.timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address->second, options);
  absl::StatusOr<std::vector<std::string>> tables =
      client.ok() ? dht::TablesOn(**client) : client.status();
  if (!tables.ok()) return absl::StrCat("keys: ", tables.status().message());
  uint64_t keys = 0;
  for (const std::string& table : *tables) {
    if (table == lock::kTable) continue;  // the lock service's names
    absl::StatusOr<uint64_t> n = dht::TableSize(**client, table);
    if (!n.ok()) return absl::StrCat("keys: ", n.status().message());
    keys += *n;
  }
  return absl::StrCat(keys, keys == 1 ? " key" : " keys");
}

absl::Status Status(cluster::EtcdClient& etcd, const cluster::ClusterAddress& where) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<cluster::MemberInfo> members,
                         cluster::ListMembers(etcd, where.name));
  absl::StatusOr<cluster::StoredMap> stored = cluster::ReadMap(etcd, where.name);
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  std::cout << "cluster " << where.name << " at " << where.endpoints << ": " << members.size()
            << (members.size() == 1 ? " member" : " members") << ", "
            << (stored.ok() ? absl::StrCat("slot map epoch ", stored->map.epoch())
                            : std::string("no slot map yet (ardma cluster create)"))
            << "\n";
  std::vector<std::string> listed;
  for (const cluster::MemberInfo& m : members) {
    std::cout << absl::StrFormat("%-16s  up    %s  %s%s", m.id,
                                 stored.ok() ? Ranges(stored->map, m.id) : std::string("-"),
                                 KeyCount(m),
                                 stored.ok() ? ReplicaText(stored->map, m.id) : std::string())
              << "\n  " << Addresses(m) << "\n";
    listed.push_back(m.id);
  }
  if (!stored.ok()) return absl::OkStatus();
  bool down = false;
  for (const std::string& owner : stored->map.Servers()) {
    if (std::find(listed.begin(), listed.end(), owner) != listed.end()) continue;
    std::cout << absl::StrFormat("%-16s  DOWN  %s", owner, Ranges(stored->map, owner)) << "\n";
    down = true;
  }
  if (down) {
    return absl::UnavailableError("some slots are owned by servers that are not live members");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunClusterCommand(const Options& opt, const std::vector<std::string>& args) {
  constexpr char kUsageText[] =
      "usage: ardma --server etcd://HOST:PORT/NAME cluster create [--replicas N] [ID...] | "
      "status | add ID | "
      "remove ID | rebalance | fix";
  const std::string sub = args.size() > 1 ? args[1] : "";
  const bool shape_ok = sub == "create" ||
                        ((sub == "status" || sub == "rebalance" || sub == "fix") && args.size() == 2) ||
                        ((sub == "add" || sub == "remove") && args.size() == 3);
  if (!shape_ok) return Usage(kUsageText);
  absl::StatusOr<cluster::ClusterAddress> where = cluster::ParseClusterAddress(opt.server);
  if (!where.ok()) return Usage(absl::StrCat("--server: ", where.status().message()));
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<cluster::EtcdClient> etcd,
                         cluster::EtcdClient::Connect(where->endpoints));
  if (args[1] == "status") return Status(*etcd, *where);
  if (args[1] != "create") return RunRebalance(*etcd, *where, args, opt.lock_wait);
  if (opt.replicas < 0 || opt.replicas > 1000) {
    return Usage(absl::StrCat("cluster create: --replicas takes a count, not ", opt.replicas));
  }
  std::vector<std::string> ids(args.begin() + 2, args.end());
  const uint32_t replicas = static_cast<uint32_t>(opt.replicas);
  ARDMA_ASSIGN_OR_RETURN(cluster::SlotMap map,
                         cluster::CreateMap(*etcd, where->name, std::move(ids), replicas));
  std::cout << "cluster " << where->name << ": slot map epoch " << map.epoch() << " over "
            << map.Servers().size() << (map.Servers().size() == 1 ? " server" : " servers") << "\n";
  for (const std::string& id : map.Servers()) {
    std::cout << absl::StrFormat("%-16s  %s%s", id, Ranges(map, id), ReplicaText(map, id)) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
