// ardmad --cluster: a server joins a cluster kept in a real etcd, keeps its id across restarts
// with the same memory file, leaves when it dies, and refuses bad cluster settings clearly.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/cluster/router.h"
#include "core/cluster/admin.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/testing/etcd_process.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;
using testing::BinDir;
using testing::RunCommand;
using testing::TempPath;

class ClusterMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
    etcd_client_ = *cluster::EtcdClient::Connect(etcd_.endpoint());
  }
  std::string Cluster() const { return absl::StrCat("etcd://", etcd_.endpoint(), "/c1"); }
  std::vector<cluster::MemberInfo> Members() {
    std::vector<cluster::MemberInfo> out;
    absl::StatusOr<std::vector<cluster::KeyValue>> kvs =
        etcd_client_->GetPrefix(cluster::MembersPrefix("c1"));
    EXPECT_TRUE(kvs.ok()) << kvs.status();
    for (const cluster::KeyValue& kv : kvs.value_or(std::vector<cluster::KeyValue>())) {
      out.push_back(*cluster::MemberInfo::Parse(kv.value));
    }
    return out;
  }
  // Starts `n` members of cluster c1 (TTL 2 s), each on a fresh memory file named after
  // `name`, whose paths go to *heaps.
  void StartMembers(int n, const std::string& name,
                    std::vector<std::unique_ptr<testing::ServerProcess>>* servers,
                    std::vector<std::string>* heaps) {
    for (int i = 0; i < n; ++i) {
      heaps->push_back(TempPath(absl::StrCat(name, i)));
      std::filesystem::remove(heaps->back());
      servers->push_back(std::make_unique<testing::ServerProcess>(
          std::vector<std::string>{"--memory-file", heaps->back(), "--memory", "32M", "--cluster",
                                   Cluster(), "--cluster-ttl", "2s"}));
      ASSERT_FALSE(servers->back()->address().empty());
    }
  }
  // `ardma cluster create`, then a Cluster client of c1 in *routed.
  void CreateAndConnect(std::unique_ptr<cluster::Cluster>* routed) {
    std::string out;
    ASSERT_EQ(RunCommand(BinDir() + "/ardma --server " + Cluster() + " cluster create", &out), 0)
        << out;
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> connected =
        cluster::Cluster::Connect(Cluster());
    ASSERT_TRUE(connected.ok()) << connected.status();
    *routed = *std::move(connected);
  }
  testing::EtcdProcess etcd_;
  std::unique_ptr<cluster::EtcdClient> etcd_client_;
};

TEST_F(ClusterMembershipTest, AServerKeepsItsIdAcrossARestartAndLeavesWhenItDies) {
  std::string heap = TempPath("cluster_heap");
  std::filesystem::remove(heap);
  std::vector<std::string> flags = {"--memory-file", heap,      "--memory",      "64M",
                                    "--cluster",     Cluster(), "--cluster-ttl", "2s"};
  std::string id;
  {
    testing::ServerProcess first(flags);
    ASSERT_FALSE(first.address().empty());
    std::vector<cluster::MemberInfo> members = Members();  // registered before it listens
    ASSERT_EQ(members.size(), 1u);
    id = members[0].id;
    EXPECT_EQ(id.size(), 16u);
    EXPECT_EQ(members[0].addresses["tcp"], first.address());
    first.Kill(SIGKILL);  // no goodbye: the lease runs out
    EXPECT_TRUE(testing::WaitUntil([&] { return Members().empty(); }, absl::Seconds(15),
                                   absl::Milliseconds(100)))
        << "a dead server stayed a member";
  }
  testing::ServerProcess again(flags);
  ASSERT_FALSE(again.address().empty());
  std::vector<cluster::MemberInfo> members = Members();
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].id, id) << "the id lives in the memory file";
  EXPECT_EQ(members[0].addresses["tcp"], again.address());

  // A copy of the memory file carries the id: a second server from it is refused while the
  // first lives (timeout ends it if it were not).
  std::string copy = TempPath("cluster_heap_copy");
  std::filesystem::copy_file(heap, copy, std::filesystem::copy_options::overwrite_existing);
  std::string out;
  EXPECT_EQ(RunCommand(absl::StrCat("timeout 20 ", BinDir(),
                                    "/ardmad --listen 127.0.0.1:0 --quiet --memory-file ", copy,
                                    " --cluster ", Cluster()),
                       &out),
            1)
      << out;
  EXPECT_THAT(out, HasSubstr("is already registered in cluster c1"));
  EXPECT_EQ(Members().size(), 1u);

  // --advertise: the host registered is the one given, with the port it listens on.
  {
    testing::ServerProcess advertised({"--memory", "16M", "--cluster", Cluster(), "--cluster-ttl",
                                       "2s", "--advertise", "localhost"});
    ASSERT_FALSE(advertised.address().empty());
    const std::string port = advertised.address().substr(advertised.address().rfind(':'));
    bool seen = false;
    for (cluster::MemberInfo& m : Members()) {
      if (m.id == id) continue;
      seen = true;
      EXPECT_EQ(m.addresses["tcp"], "localhost" + port);
    }
    EXPECT_TRUE(seen);
    advertised.Kill(SIGTERM);  // leaves at once
  }
  // A clean stop leaves at once.
  again.Kill(SIGTERM);
  EXPECT_TRUE(Members().empty());
  std::filesystem::remove(heap);
  std::filesystem::remove(copy);
}

// `ardma cluster create|status` over three live servers: one map, made once; a dead owner shows.
TEST_F(ClusterMembershipTest, AdminsCreateTheMapOnceAndStatusShowsEveryServer) {
  std::vector<std::unique_ptr<testing::ServerProcess>> servers;
  std::vector<std::string> heaps;
  ASSERT_NO_FATAL_FAILURE(StartMembers(3, "cluster_member", &servers, &heaps));
  std::string ardma = BinDir() + "/ardma --server " + Cluster() + " cluster ";
  std::string out;
  EXPECT_EQ(RunCommand(ardma + "status", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("3 members, no slot map yet"));
  EXPECT_EQ(RunCommand(ardma + "create nosuchid", &out), 1);
  EXPECT_THAT(out, HasSubstr("server nosuchid is not a live member of cluster c1"));
  EXPECT_EQ(RunCommand(ardma + "create --replicas 3", &out), 1);
  EXPECT_THAT(out, HasSubstr("3 replicas need more than 3 servers"));
  EXPECT_EQ(RunCommand(ardma + "create --replicas=-1", &out), 2);
  EXPECT_THAT(out, HasSubstr("--replicas takes a count"));
  // Two admins at once: exactly one creates the map. (Replicas: ReplicatedWrites... below.)
  EXPECT_EQ(RunCommand("(" + ardma + "create > /dev/null 2>&1; echo $?) & (" + ardma +
                           "create > /dev/null 2>&1; echo $?) & wait",
                       &out),
            0);
  EXPECT_THAT(out, ::testing::AnyOf("0\n1\n", "1\n0\n")) << out;
  EXPECT_EQ(RunCommand(ardma + "create", &out), 1);
  EXPECT_THAT(out, HasSubstr("has a slot map already"));
  absl::StatusOr<cluster::StoredMap> stored = cluster::ReadMap(*etcd_client_, "c1");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->map.epoch(), 1u);
  EXPECT_EQ(stored->map.Servers().size(), 3u);
  EXPECT_EQ(RunCommand(ardma + "status", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("slot map epoch 1"));
  EXPECT_THAT(out, HasSubstr("(5461 slots)"));
  EXPECT_THAT(out, HasSubstr("tcp " + servers[1]->address()));

  // The DHT through the cluster: each key is on the server the map names.
  std::string dht = BinDir() + "/ardma --server " + Cluster() + " ";
  std::vector<cluster::MemberInfo> members = Members();
  for (const char* mode : {"active", "rdma"}) {
    for (int i = 0; i < 6; ++i) {
      std::string key = absl::StrCat(mode, i);
      EXPECT_EQ(RunCommand(absl::StrCat(dht, "--mode ", mode, " dht put t ", key, " v", i), &out),
                0)
          << out;
      EXPECT_EQ(RunCommand(absl::StrCat(dht, "--mode ", mode, " dht get t ", key), &out), 0);
      EXPECT_EQ(out, absl::StrCat("v", i, "\n"));
      std::string owner = stored->map.Owner(cluster::SlotOf("t", key));
      for (const cluster::MemberInfo& m : members) {
        int status = RunCommand(
            absl::StrCat(BinDir(), "/ardma --server ", m.addresses.at("tcp"), " dht get t ", key),
            &out);
        EXPECT_EQ(status, m.id == owner ? 0 : 1) << key << " on " << m.id << ": " << out;
      }
    }
  }
  EXPECT_EQ(RunCommand(dht + "dht size t", &out), 0);
  EXPECT_EQ(out, "12\n");
  // status counts each server's keys: 12 in all.
  EXPECT_EQ(RunCommand(ardma + "status", &out), 0) << out;
  int counted = 0;
  for (size_t at = out.find(" key"); at != std::string::npos; at = out.find(" key", at + 1)) {
    size_t start = out.rfind(' ', at - 1) + 1;
    counted += std::stoi(out.substr(start, at - start));
  }
  EXPECT_EQ(counted, 12) << out;
  // A list, whole on its name's server; a lock on its name's server.
  EXPECT_EQ(RunCommand(dht + "list push q a b c", &out), 0) << out;
  EXPECT_EQ(out, "3\n");
  EXPECT_EQ(RunCommand(dht + "--mode rdma list range q", &out), 0) << out;
  EXPECT_EQ(out, "a\nb\nc\n");
  EXPECT_EQ(RunCommand(dht + "list pop q", &out), 0) << out;
  EXPECT_EQ(out, "a\n");
  EXPECT_EQ(RunCommand(dht + "list range q 1 -1", &out), 0) << out;
  EXPECT_EQ(out, "c\n");
  for (const cluster::MemberInfo& m : members) {
    int status = RunCommand(
        absl::StrCat(BinDir(), "/ardma --server ", m.addresses.at("tcp"), " list len q"), &out);
    bool owner = m.id == stored->map.Owner(cluster::SlotOf("list", "q"));
    EXPECT_EQ(status, owner ? 0 : 1) << m.id << ": " << out;
    if (owner) {
      EXPECT_EQ(out, "2\n");
    }
  }
  EXPECT_EQ(RunCommand(dht + "lock job -- sh -c 'echo token $ARDMA_LOCK_TOKEN'", &out), 0) << out;
  EXPECT_EQ(out, "token 1\n");

  // One dies: status says which slots have no live server, and fails.
  servers[1]->Kill(SIGKILL);
  EXPECT_TRUE(testing::WaitUntil([&] { return RunCommand(ardma + "status", &out) == 1; },
                                 absl::Seconds(15), absl::Milliseconds(200)))
      << out;
  EXPECT_THAT(out, HasSubstr("DOWN"));
  // Back from its memory file, with its id: its slots are served again.
  servers[1] = std::make_unique<testing::ServerProcess>(std::vector<std::string>{
      "--memory-file", heaps[1], "--cluster", Cluster(), "--cluster-ttl", "2s"});
  ASSERT_FALSE(servers[1]->address().empty());
  EXPECT_EQ(RunCommand(ardma + "status", &out), 0) << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("DOWN")));

  // etcd away: the admin command says so.
  etcd_.Kill(SIGKILL);
  EXPECT_EQ(RunCommand(ardma + "status", &out), 1);
  EXPECT_THAT(out, HasSubstr("is unreachable"));
  servers.clear();
  for (const std::string& heap : heaps) std::filesystem::remove(heap);
}

// `cluster create --replicas 1` on three ardmads: each server's DHT writes are on the next one
// too before they are acknowledged; one-sided writes and the services that do not replicate yet
// are refused. Failover: a killed server's slots go to its replica (which serves every write it
// acknowledged, and takes writes again once its own replica is filled with them); the server,
// restarted from its memory file, rejoins as a replica and is filled; a server stopped for longer
// than its lease takes no write when it runs again (self-fencing) and ends (fail-stop), its slots
// served by its replica — the one filled after its restart — with every acknowledged write.
TEST_F(ClusterMembershipTest, FailoverPromotesTheReplicaFillsReturningMembersAndFencesTheStale) {
  std::vector<std::unique_ptr<testing::ServerProcess>> servers;
  std::vector<std::string> heaps;
  ASSERT_NO_FATAL_FAILURE(StartMembers(3, "replicated_member", &servers, &heaps));
  absl::Cleanup remove_heaps = [&] {
    servers.clear();
    for (const std::string& heap : heaps) std::filesystem::remove(heap);
  };
  const std::string ardma = BinDir() + "/ardma --server " + Cluster() + " ";
  std::string out;
  ASSERT_EQ(RunCommand(ardma + "cluster create --replicas 1", &out), 0) << out;
  absl::StatusOr<cluster::StoredMap> stored = cluster::ReadMap(*etcd_client_, "c1");
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::map<std::string, int> index;  // member id -> servers[i]
  for (const cluster::MemberInfo& m : Members()) {
    for (int i = 0; i < 3; ++i) {
      if (m.addresses.at("tcp") == servers[i]->address()) index[m.id] = i;
    }
    EXPECT_EQ(stored->map.ReplicasOf(m.id).size(), 1u) << m.id;
  }
  ASSERT_EQ(index.size(), 3u);
  auto id_of = [&](int i) {
    return std::find_if(index.begin(), index.end(), [&](const auto& kv) {
             return kv.second == i;
           })->first;
  };
  EXPECT_EQ(RunCommand(ardma + "cluster status", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("  replica "));
  EXPECT_EQ(RunCommand(ardma + "--mode rdma dht put t other v", &out), 1);
  EXPECT_THAT(out, HasSubstr("is replicated"));
  EXPECT_EQ(RunCommand(ardma + "list push q a", &out), 1);
  EXPECT_THAT(out, HasSubstr("does not replicate its writes yet"));
  EXPECT_EQ(RunCommand(ardma + "cluster rebalance", &out), 1);
  EXPECT_THAT(out, HasSubstr("moving replicated slots is not built yet"));

  // Keys on every server, written through a Cluster client; `last` is what each must read.
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = cluster::Cluster::Connect(Cluster());
  ASSERT_TRUE(routed.ok()) << routed.status();
  dht::DhtClient dht(routed->get(), Mode::kActive);
  std::map<std::string, std::string> last;
  auto write_all = [&](const std::string& round) {
    for (int k = 0; k < 60; ++k) {
      const std::string key = absl::StrCat("k", k), value = absl::StrCat(round, "-", k);
      absl::StatusOr<bool> put = dht.Put("t", key, value);
      if (!put.ok()) return put.status();
      last[key] = value;
    }
    return absl::OkStatus();
  };
  auto read_all = [&]() -> absl::Status {
    for (const auto& [key, value] : last) {
      absl::StatusOr<std::string> got = dht.Get("t", key);
      if (!got.ok()) return got.status();
      if (*got != value) {
        return absl::DataLossError(absl::StrCat(key, " reads ", *got, ", not ", value));
      }
    }
    return absl::OkStatus();
  };
  ASSERT_TRUE(write_all("first").ok());
  const std::string key_of_1 = [&] {
    for (const auto& [key, value] : last) {
      if (index[stored->map.Owner(cluster::SlotOf("t", key))] == 1) return key;
    }
    return std::string();
  }();
  ASSERT_FALSE(key_of_1.empty());

  // Server 1 dies: its key is read from its replica at once, and, once failover gave the replica
  // its slots (and the replica's replica was filled with them), every key takes writes again.
  servers[1]->Kill(SIGKILL);
  EXPECT_EQ(RunCommand(ardma + "--read-from-replica dht get t " + key_of_1, &out), 0) << out;
  EXPECT_EQ(out, last[key_of_1] + "\n");
  absl::Status status;
  EXPECT_TRUE(testing::WaitUntil([&] { return (status = write_all("second")).ok(); },
                                 absl::Seconds(30), absl::Milliseconds(100)))
      << status;
  EXPECT_TRUE((status = read_all()).ok()) << status;
  absl::StatusOr<cluster::StoredMap> after = cluster::ReadMap(*etcd_client_, "c1");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(after->map.epoch(), stored->map.epoch());
  EXPECT_EQ(after->map.SlotCount(id_of(1)), 0u);

  // A new server in its place (an empty memory: a new id, no table yet) owns nothing: it becomes
  // the replica of the server left without one, and is filled.
  heaps.push_back(heaps[1] + ".new");
  std::filesystem::remove(heaps.back());
  servers[1] = std::make_unique<testing::ServerProcess>(std::vector<std::string>{
      "--memory-file", heaps.back(), "--memory", "32M", "--cluster", Cluster(), "--cluster-ttl",
      "2s"});
  ASSERT_FALSE(servers[1]->address().empty());
  std::string new_id;
  for (const cluster::MemberInfo& m : Members()) {
    if (m.addresses.at("tcp") == servers[1]->address()) new_id = m.id;
  }
  ASSERT_FALSE(new_id.empty());
  index.erase(id_of(1));
  index[new_id] = 1;
  ASSERT_EQ(index.size(), 3u);
  auto replicated_on_1 = [&] {
    absl::StatusOr<cluster::StoredMap> now = cluster::ReadMap(*etcd_client_, "c1");
    if (!now.ok()) return false;
    for (const auto& [owner, replicas] : now->map.replicas()) {
      if (std::find(replicas.begin(), replicas.end(), id_of(1)) != replicas.end()) return true;
    }
    return false;
  };
  EXPECT_TRUE(testing::WaitUntil(replicated_on_1, absl::Seconds(30), absl::Milliseconds(50)));
  EXPECT_TRUE(testing::WaitUntil([&] { return (status = write_all("third")).ok(); },
                                 absl::Seconds(30), absl::Milliseconds(100)))
      << status;

  // The owner of most slots stops for longer than its lease: when it runs again it takes no
  // write (sent to it directly: the write is not made), and ends; its replica serves its slots.
  after = cluster::ReadMap(*etcd_client_, "c1");
  ASSERT_TRUE(after.ok()) << after.status();
  const std::string big = after->map.SlotCount(id_of(0)) > after->map.SlotCount(id_of(2))
                              ? id_of(0) : id_of(2);
  testing::ServerProcess& stopped = *servers[index[big]];
  const std::string stopped_address = stopped.address();
  ASSERT_TRUE(stopped.Freeze());
  auto registered = [&] {
    std::vector<cluster::MemberInfo> members = Members();
    return std::any_of(members.begin(), members.end(),
                       [&](const cluster::MemberInfo& m) { return m.id == big; });
  };
  EXPECT_TRUE(testing::WaitUntil([&] { return !registered(); }, absl::Seconds(15)));
  const std::string stale_key = [&] {
    for (const auto& [key, value] : last) {
      if (after->map.Owner(cluster::SlotOf("t", key)) == big) return key;
    }
    return std::string();
  }();
  ASSERT_FALSE(stale_key.empty());
  stopped.Signal(SIGCONT);
  EXPECT_NE(RunCommand(BinDir() + "/ardma --server " + stopped_address + " dht put t " +
                           stale_key + " stale",
                       &out),
            0)
      << out;
  std::optional<int> exited;
  EXPECT_TRUE(testing::WaitUntil([&] { return (exited = stopped.Exited()).has_value(); },
                                 absl::Seconds(15)));
  if (exited.has_value()) {
    EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 3) << *exited;
  }
  EXPECT_TRUE(testing::WaitUntil([&] { return (status = read_all()).ok(); }, absl::Seconds(30),
                                 absl::Milliseconds(100)))
      << status;
  EXPECT_TRUE(testing::WaitUntil([&] { return (status = write_all("fourth")).ok(); },
                                 absl::Seconds(30), absl::Milliseconds(100)))
      << status;
  EXPECT_TRUE((status = read_all()).ok()) << status;
}

// SIGKILL one of three under load: calls for its slots never hang and, once etcd has dropped it
// (its TTL), answer UNAVAILABLE naming it, within TTL + 1 s of the kill; the other servers' keys
// keep working without one error; restarted from its memory file (at a new address) it serves its
// keys again, intact, through the same Cluster.
// ardma-monitor given the cluster's address polls every member; a member that joins is polled
// without a restart, one that leaves is no longer polled.
TEST_F(ClusterMembershipTest, TheMonitorFollowsTheClustersMembers) {
  auto member = [&] {
    return std::make_unique<testing::ServerProcess>(std::vector<std::string>{
        "--memory", "16M", "--ucx", "off", "--cluster", Cluster(), "--cluster-ttl", "2s"});
  };
  std::vector<std::unique_ptr<testing::ServerProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(member());
    ASSERT_FALSE(servers.back()->address().empty());
  }
  const std::string out_file = TempPath("monitor.out");
  const std::string monitor =
      absl::StrCat(BinDir(), "/ardma-monitor --backends ", Cluster(), " --lines --interval 100ms");
  std::thread runner([&] {
    std::string ignored;
    RunCommand(absl::StrCat("timeout -s INT 90 ", monitor, " > ", out_file, " 2>&1"), &ignored);
  });
  auto output = [&] {
    std::ifstream in(out_file);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  auto polls = [&](const std::string& address, size_t from = 0) {
    std::string text = output();
    size_t n = 0;
    for (size_t at = text.find(" " + address + " rdma-sync seq=", from);
         at != std::string::npos; at = text.find(" " + address + " rdma-sync seq=", at + 1)) {
      ++n;
    }
    return n;
  };
  absl::Cleanup stop_monitor = [&] {
    std::string ignored;
    RunCommand("pkill -INT -f '" + monitor + "'", &ignored);
    runner.join();
    std::filesystem::remove(out_file);
  };
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return polls(servers[0]->address()) > 0 && polls(servers[1]->address()) > 0; },
      absl::Seconds(20), absl::Milliseconds(50)))
      << output();
  servers.push_back(member());
  ASSERT_FALSE(servers.back()->address().empty());
  EXPECT_TRUE(testing::WaitUntil([&] { return polls(servers[2]->address()) > 0; },
                                 absl::Seconds(20), absl::Milliseconds(50)))
      << "a member that joined was not polled:\n"
      << output();
  servers[0]->Kill(SIGTERM);  // leaves the cluster at once
  const std::string left = servers[0]->address() + " rdma-sync left the cluster";
  EXPECT_TRUE(testing::WaitUntil([&] { return output().find(left) != std::string::npos; },
                                 absl::Seconds(20), absl::Milliseconds(50)))
      << output();
  // After it left: the others polled on, it not at all.
  size_t after = output().find(left);
  ASSERT_NE(after, std::string::npos);
  EXPECT_TRUE(testing::WaitUntil([&] { return polls(servers[1]->address(), after) >= 3; },
                                 absl::Seconds(20), absl::Milliseconds(50)))
      << output();
  EXPECT_EQ(polls(servers[0]->address(), after), 0u) << output();
}

TEST_F(ClusterMembershipTest, AKilledServersSlotsFailFastAndComeBackIntact) {
  constexpr absl::Duration kTtl = absl::Seconds(2);
  std::vector<std::unique_ptr<testing::ServerProcess>> servers;
  std::vector<std::vector<std::string>> flags;
  for (int i = 0; i < 3; ++i) {
    std::string heap = TempPath(absl::StrCat("failure_member", i));
    std::filesystem::remove(heap);
    flags.push_back({"--memory-file", heap, "--memory", "64M", "--cluster", Cluster(),
                     "--cluster-ttl", "2s"});
    servers.push_back(std::make_unique<testing::ServerProcess>(flags.back()));
    ASSERT_FALSE(servers.back()->address().empty());
  }
  std::unique_ptr<cluster::Cluster> routed;
  ASSERT_NO_FATAL_FAILURE(CreateAndConnect(&routed));
  dht::DhtClient dht(routed.get(), Mode::kActive);
  std::string victim;  // the id of servers[1]
  for (const cluster::MemberInfo& m : Members()) {
    if (m.addresses.at("tcp") == servers[1]->address()) victim = m.id;
  }
  ASSERT_FALSE(victim.empty());
  std::vector<std::string> victims_keys, others_keys;
  for (int i = 0; i < 3000; ++i) {
    std::string key = absl::StrCat("k", i);
    ASSERT_TRUE(dht.Put("t", key, absl::StrCat("v", i)).ok());
    bool its = routed->map()->Owner(cluster::SlotOf("t", key)) == victim;
    (its ? victims_keys : others_keys).push_back(key);
  }
  ASSERT_FALSE(victims_keys.empty());
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0}, reads{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 2; ++t) {
    load.emplace_back([&, t] {
      for (size_t i = t; !stop; i = (i + 2) % others_keys.size()) {
        absl::StatusOr<std::string> v = dht.Get("t", others_keys[i]);
        if (!v.ok() || *v != "v" + others_keys[i].substr(1)) {
          if (errors++ == 0) ADD_FAILURE() << others_keys[i] << ": " << v.status();
        }
        ++reads;
      }
    });
  }
  const absl::Time killed = absl::Now();
  servers[1]->Kill(SIGKILL);
  absl::Status seen;
  bool named = testing::WaitUntil(
      [&] {
        seen = dht.Get("t", victims_keys[0]).status();
        return absl::IsUnavailable(seen) && absl::StrContains(seen.message(), victim);
      },
      kTtl + absl::Seconds(1), absl::Milliseconds(20));
  EXPECT_TRUE(named) << "after " << absl::Now() - killed << ": " << seen;
  RecordProperty("unavailable_after_ms", static_cast<int>((absl::Now() - killed) / absl::Milliseconds(1)));
  const int reads_at_kill = reads;
  ASSERT_TRUE(testing::WaitUntil([&] { return reads > reads_at_kill + 200; }, absl::Seconds(30)));
  stop = true;
  for (std::thread& t : load) t.join();
  EXPECT_EQ(errors, 0) << "calls for the live servers' keys failed";

  servers[1] = std::make_unique<testing::ServerProcess>(flags[1]);
  ASSERT_FALSE(servers[1]->address().empty());
  EXPECT_TRUE(testing::WaitUntil([&] { return dht.Get("t", victims_keys[0]).ok(); },
                                 absl::Seconds(15), absl::Milliseconds(50)))
      << "the restarted server's keys did not come back";
  for (const std::string& key : victims_keys) {
    absl::StatusOr<std::string> v = dht.Get("t", key);
    ASSERT_TRUE(v.ok()) << key << ": " << v.status();
    EXPECT_EQ(*v, "v" + key.substr(1));
  }
  servers.clear();
  for (const std::vector<std::string>& f : flags) std::filesystem::remove(f[1]);
}

// A stopped member (SIGSTOP: its connections stay open, nothing answers) holds its clients' calls
// until their timeout, unless the client gives them up once etcd dropped it: then they fail,
// naming why, and the caller can go to the slots' next owner.
TEST_F(ClusterMembershipTest, ACallWaitingOnAStoppedMemberFailsOnceEtcdDropsIt) {
  std::vector<std::unique_ptr<testing::ServerProcess>> servers;
  std::vector<std::string> heaps;
  ASSERT_NO_FATAL_FAILURE(StartMembers(1, "stopped_member", &servers, &heaps));
  std::unique_ptr<cluster::Cluster> routed;
  ASSERT_NO_FATAL_FAILURE(CreateAndConnect(&routed));
  dht::DhtClient dht(routed.get(), Mode::kActive);
  ASSERT_TRUE(dht.Put("t", "k", "v").ok());
  ASSERT_TRUE(servers[0]->Freeze());
  absl::Status answer;
  std::atomic<bool> answered{false};
  std::thread waiting([&] {  // (the client's timeout: 30 s; the lease: 2 s)
    answer = dht.Put("t", "k", "w").status();
    answered = true;
  });
  const bool gave_up = testing::WaitUntil([&] { return answered.load(); }, absl::Seconds(25));
  servers[0]->Signal(SIGCONT);
  waiting.join();
  EXPECT_TRUE(gave_up) << "the call waited out its timeout";
  EXPECT_EQ(answer.code(), absl::StatusCode::kUnavailable) << answer;
  EXPECT_TRUE(absl::StrContains(answer.message(), "left cluster")) << answer;
  servers.clear();
  for (const std::string& heap : heaps) std::filesystem::remove(heap);
}

TEST(ClusterFlagsTest, BadClusterSettingsAreClearErrors) {
  std::string ardmad = BinDir() + "/ardmad --listen 127.0.0.1:0 --quiet --memory 16M ";
  std::string out;
  EXPECT_EQ(RunCommand(ardmad + "--cluster http://127.0.0.1:1/c1", &out), 2);
  EXPECT_THAT(out, HasSubstr("does not start with etcd://"));
  EXPECT_EQ(RunCommand(ardmad + "--cluster 'etcd://127.0.0.1:1/no spaces'", &out), 2);
  EXPECT_THAT(out, HasSubstr("letters, digits"));
  EXPECT_EQ(RunCommand(ardmad + "--cluster etcd://127.0.0.1:1/c1 --cluster-ttl 1s", &out), 2);
  EXPECT_THAT(out, HasSubstr("--cluster-ttl"));
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 0.0.0.0:0 --quiet --memory 16M "
                       "--cluster etcd://127.0.0.1:1/c1", &out), 2);
  EXPECT_THAT(out, HasSubstr("needs --advertise HOST"));
  EXPECT_EQ(RunCommand(ardmad + "--advertise db1.example", &out), 2);
  EXPECT_THAT(out, HasSubstr("--advertise needs --cluster"));
  EXPECT_EQ(RunCommand(ardmad + "--cluster etcd://127.0.0.1:1/c1 --advertise 'a b'", &out), 2);
  EXPECT_THAT(out, HasSubstr("is not a host name or address"));
  // Nothing listens there: the server does not start half-joined.
  EXPECT_EQ(RunCommand("timeout 20 " + ardmad + "--cluster etcd://127.0.0.1:1/c1", &out), 1);
  EXPECT_THAT(out, HasSubstr("etcd at 127.0.0.1:1 is unreachable"));
}

}  // namespace
}  // namespace ardma
