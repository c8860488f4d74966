#include "core/testing/cluster_fixture.h"

#include "absl/strings/str_cat.h"
#include "core/cluster/admin.h"
#include "core/cluster/fence.h"
#include "core/cluster/member.h"
#include "core/cluster/slot.h"
#include "core/status_macros.h"

namespace ardma::testing {

namespace {
ServerOptions WithMemory(uint64_t memory_size) {
  ServerOptions options = TestServerOptions();
  options.memory_size = memory_size;
  return options;
}
}  // namespace

ClusterFixture::ClusterFixture(int n, uint64_t memory_size, int owners)
    : ClusterFixture(n, WithMemory(memory_size), owners) {}

ClusterFixture::ClusterFixture(int n, ServerOptions options, int owners, uint32_t replicas,
                               std::string peer_transport, Companion companion)
    : companion_(std::move(companion)) {
  if (etcd_.endpoint().empty()) {
    why_ = "etcd did not start (is etcd-server installed?)";
    return;
  }
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> client =
      cluster::EtcdClient::Connect(etcd_.endpoint());
  if (!client.ok()) {
    why_ = std::string(client.status().message());
    return;
  }
  etcd_client_ = *std::move(client);
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    cluster::Cluster::Options peer_options;
    peer_options.client.credentials_from_environment = false;
    peer_options.client.connect_attempts = 1;  // a member that is down fails the call at once
    // The members call each other as the tests' clients call them (UCX_TLS is set then).
    peer_options.transport = !peer_transport.empty()                ? peer_transport
                             : TestTransport().rfind("ucx", 0) == 0 ? "ucx"
                                                                    : "tcp";
    peers_.push_back(std::make_unique<cluster::PeerCalls>(address(), peer_options));
    replications_.push_back(std::make_unique<SlotReplication>(peers_.back().get()));
    options_ = options;
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start(ServerOwn(i));
    if (!server.ok()) {
      why_ = std::string(server.status().message());
      return;
    }
    servers_.push_back(*std::move(server));
    ids.push_back(absl::StrCat("s", i));
    Register(ids.back(), servers_.back()->address());
  }
  const std::vector<std::string> slot_owners =
      owners < 0 ? ids : std::vector<std::string>(ids.begin(), ids.begin() + owners);
  absl::StatusOr<cluster::SlotMap> map = cluster::SlotMap::Even(slot_owners).WithReplicas(replicas);
  if (!map.ok()) {
    why_ = std::string(map.status().message());
    return;
  }
  if (absl::Status s = etcd_client_->Put(cluster::MapKey("c1"), map->ToJson()); !s.ok()) {
    why_ = std::string(s.message());
  }
  companions_.resize(servers_.size());
  for (size_t i = 0; i < servers_.size() && ok(); ++i) {
    absl::Status taken = TakeMap(static_cast<int>(i), *map);
    if (!taken.ok()) why_ = std::string(taken.message());
    StartCompanion(static_cast<int>(i));
  }
}

void ClusterFixture::StartCompanion(int i) {
  if (companion_ == nullptr) return;
  companions_[i] = companion_(Member{.id = absl::StrCat("s", i),
                                     .server = &servers_[i]->server(),
                                     .peers = peers_[i].get(),
                                     .replication = replications_[i].get()});
}

absl::Status ClusterFixture::TakeMap(int i, const cluster::SlotMap& map) {
  const std::string id = absl::StrCat("s", i);
  replications_[i]->SetRoles(map.ReplicasOf(id), map.SlotsReplicatedOn(id), map.SlotsOf(id));
  return servers_[i]->server().RunLocally(
      [&](Context& ctx) { return cluster::AdoptSlots(ctx, map, id); });
}

void ClusterFixture::Stop(int i) {
  companions_[i].reset();
  servers_[i].reset();
}

ServerOptions ClusterFixture::ServerOwn(int i) const {
  ServerOptions options = options_;
  options.handler.peers = peers_[i].get();
  options.handler.replication = replications_[i].get();
  if (!options.memory_file.empty()) options.memory_file = absl::StrCat(options.memory_file, ".", i);
  return options;
}

absl::Status ClusterFixture::Restart(int i) {
  Stop(i);
  // (A new process: its replication starts afresh, as a new incarnation that has applied
  // nothing.)
  replications_[i] = std::make_unique<SlotReplication>(peers_[i].get());
  ARDMA_ASSIGN_OR_RETURN(servers_[i], TestServer::Start(ServerOwn(i)));
  Register(absl::StrCat("s", i), servers_[i]->address());
  if (!ok()) return absl::InternalError(why_);
  ARDMA_ASSIGN_OR_RETURN(cluster::StoredMap stored, cluster::ReadMap(*etcd_client_, "c1"));
  ARDMA_RETURN_IF_ERROR(TakeMap(i, stored.map));
  StartCompanion(i);
  return absl::OkStatus();
}

std::string ClusterFixture::address() const { return absl::StrCat("etcd://", etcd_.endpoint(), "/c1"); }

void ClusterFixture::Register(const std::string& id, const std::string& address) {
  cluster::MemberInfo member{id, {{"tcp", address}, {"ucx", "ucx://" + address}}};
  if (absl::Status s = etcd_client_->Put(cluster::MembersPrefix("c1") + id, member.ToJson());
      !s.ok()) {
    why_ = std::string(s.message());
  }
}

absl::StatusOr<std::unique_ptr<cluster::Cluster>> ClusterFixture::ConnectOverTestTransport(
    absl::Duration refresh_interval) const {
  cluster::Cluster::Options options;
  options.refresh_interval = refresh_interval;
  options.transport = TestTransport().rfind("ucx", 0) == 0 ? "ucx" : "tcp";
  return cluster::Cluster::Connect(address(), options);
}

std::vector<std::unique_ptr<Client>> ClusterFixture::ClientOfEachServer() {
  std::vector<std::unique_ptr<Client>> out;
  for (std::unique_ptr<TestServer>& server : servers_) {
    if (server == nullptr) {  // stopped
      out.push_back(nullptr);
      continue;
    }
    absl::StatusOr<std::unique_ptr<Client>> client = server->NewClient();
    out.push_back(client.ok() ? *std::move(client) : nullptr);
  }
  return out;
}

}  // namespace ardma::testing
