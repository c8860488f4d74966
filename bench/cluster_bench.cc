// What routing through a cluster costs (docs/cluster.md): a DHT GET through cluster::Cluster, on a
// cluster of one member, against the same GET through a plain Client of that member, in one run.
//
//   BM_DhtGetRouting/<path>/<mode>/<ucx>
//     path 0: a plain Client of the server; 1: a Cluster (etcd://...) whose one member it is
//     mode 0: active (one EXECUTE); 1: RDMA (the table's code here, one-sided reads)
//     ucx  0: TCP; 1: UCX (shared memory unless UCX_TLS says otherwise)
//
//   BM_ReshardAdd: `ardma cluster add` on four in-process members, the map over the first three,
//     ARDMA_BENCH_RESHARD_KEYS keys (default 1,000,000; 3-byte values) put beforehand: the time to
//     move a quarter of the slots (4096) with their keys to the fourth (bench/reshard_compare.sh
//     runs it beside redis-cli --cluster reshard; Redis Cluster needs three masters to start).
//
//   BM_DhtReplicas/<replicas>/<get>/<ucx>: a DHT PUT (get 0) or GET (get 1) of a 16-byte value
//     through a Cluster of two in-process members whose slots have `replicas` (0 or 1) replicas
//     each (docs/cluster.md, "Replication"), on keys of the first member: what synchronous
//     replication costs a write, and that a read pays nothing for it. The members call each
//     other over the row's transport (ARDMA_BENCH_PEERS=tcp|ucx overrides it). Counters as below
//     (the client's round trips: the primary's call of its replica is not the client's).
//
//   BM_Failover: three ardmad processes (--cluster-ttl 2s) and a real etcd, `ardma cluster create
//     --replicas 1`, 1,000 keys put; each iteration SIGKILLs the owner of key "k0" and puts k0
//     until it is acknowledged: the time from the kill to that write (docs/cluster.md,
//     "Failover"; the target is the lease TTL + 1 s). Counters: ttl_s, and keys_lost — keys
//     that then read other than their last acknowledged value (must be 0). The killed member
//     is started again (fresh: it rejoins as a replica and is filled) before the next.
//
//   BM_ReplicatedPut and BM_RedisSetWait (run by bench/replicated_compare.sh, which starts both
//     clusters): PUT throughput with one replica per primary, 16 client threads with one request
//     in flight each, 3-byte values, keys from 10,000. BM_ReplicatedPut: a DhtClient PUT through
//     a Cluster of ARDMA_BENCH_CLUSTER (etcd://..., three ardmad, `cluster create --replicas 1`:
//     acknowledged once the replica applied it). BM_RedisSetWait: SET, then WAIT 1 0 (until one
//     replica has it: the same guarantee), on the master that owns the key, of the Redis Cluster
//     whose masters ARDMA_BENCH_REDIS lists (host:port,...; three masters, one replica each).
//
// The server is the binary's shared ardmad, registered in a real etcd (started on free ports) as
// the one member of cluster "bench" with every slot; it adopts its slots in its fence, so both
// paths pay the same fence checks and the difference is the routing alone. Counters:
// round_trips/op and bytes/op.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "bench/resp_client.h"
#include "benchmark/benchmark.h"
#include "core/cluster/admin.h"
#include "core/cluster/fence.h"
#include "core/cluster/member.h"
#include "core/cluster/router.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/etcd_process.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht_mover.h"
#include "services/dht/dht_client.h"
#include "services/replica_filler.h"

namespace ardma {
namespace {

constexpr int kKeys = 10000;

std::string Key(int i) { return absl::StrCat("key:", i); }

// The shared server as the one member of cluster "bench", with kKeys keys in table "routed";
// the etcd:// address (empty if etcd did not start).
const std::string& ClusterOfOne() {
  static const std::string* address = [] {
    static testing::EtcdProcess etcd;
    if (etcd.endpoint().empty()) return new std::string();
    Server& server = bench::SharedServer();
    absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> client =
        cluster::EtcdClient::Connect(etcd.endpoint());
    cluster::SlotMap map = cluster::SlotMap::AllTo("s0");
    cluster::MemberInfo self{"s0", {{"tcp", server.address()}, {"ucx", "ucx://" + server.address()}}};
    bool ok = client.ok() &&
              (*client)->Put(cluster::MembersPrefix("bench") + "s0", self.ToJson()).ok() &&
              (*client)->Put(cluster::MapKey("bench"), map.ToJson()).ok() &&
              server.RunLocally([&](Context& ctx) {
                return cluster::AdoptSlots(ctx, map, "s0");
              }).ok();
    return new std::string(ok ? absl::StrCat("etcd://", etcd.endpoint(), "/bench") : "");
  }();
  return *address;
}

void BM_DhtGetRouting(benchmark::State& state) {
  const bool routed = state.range(0) == 1;
  const Mode mode = state.range(1) == 0 ? Mode::kActive : Mode::kRdma;
  const bool ucx = state.range(2) == 1;
  const std::string& cluster_address = ClusterOfOne();
  if (cluster_address.empty()) {
    state.SkipWithError("etcd did not start");
    return;
  }
  std::unique_ptr<Client> plain =
      bench::NewClient(state, ucx ? bench::Transport::kUcx : bench::Transport::kTcp);
  if (plain == nullptr) return;
  std::unique_ptr<cluster::Cluster> cluster;
  if (routed) {
    cluster::Cluster::Options options;
    options.transport = ucx ? "ucx" : "tcp";
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> connected =
        cluster::Cluster::Connect(cluster_address, options);
    if (!connected.ok()) {
      state.SkipWithError(std::string(connected.status().message()).c_str());
      return;
    }
    cluster = *std::move(connected);
  }
  static bool filled = [&] {
    dht::DhtClient loader(plain.get(), Mode::kActive);  // (once: the first run is plain)
    for (int i = 0; i < kKeys; ++i) {
      if (!loader.Put("routed", Key(i), "val").ok()) return false;
    }
    return true;
  }();
  if (!filled) {
    state.SkipWithError("fill failed");
    return;
  }
  // The client the calls go through, whose counters count them.
  Client* counted = plain.get();
  std::unique_ptr<dht::DhtClient> dht;
  if (routed) {
    counted = *cluster->ForKey("routed", Key(0));  // the one member
    dht = std::make_unique<dht::DhtClient>(cluster.get(), mode);
    plain.reset();  // one connection polling, as on the plain path
  } else {
    dht = std::make_unique<dht::DhtClient>(plain.get(), mode);
  }
  dht->Get("routed", Key(0)).IgnoreError();  // ship the code, cache the table
  uint64_t rt0 = counted->counters().round_trips;
  uint64_t bytes0 = counted->counters().bytes_sent + counted->counters().bytes_received;
  int i = 0;
  for (auto _ : state) {
    if (!dht->Get("routed", Key(i++ % kKeys)).ok()) {
      state.SkipWithError("get failed");
      break;
    }
  }
  bench::ReportCounters(state, *counted, rt0, bytes0);
}
BENCHMARK(BM_DhtGetRouting)
    ->ArgNames({"routed", "rdma", "ucx"})
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_DhtReplicas(benchmark::State& state) {
  const uint32_t replicas = static_cast<uint32_t>(state.range(0));
  const bool get = state.range(1) == 1;
  const bool ucx = state.range(2) == 1;
  // One cluster per replica count, kept for the binary's run (each has its own etcd).
  // (The members call each other over the row's transport too, as ardmad does where it has UCX;
  // ARDMA_BENCH_PEERS=tcp or ucx overrides it.)
  const char* peers_env = std::getenv("ARDMA_BENCH_PEERS");
  const std::string peers = peers_env != nullptr ? peers_env : ucx ? "ucx" : "tcp";
  static std::map<std::pair<uint32_t, std::string>, std::unique_ptr<testing::ClusterFixture>>
      clusters;
  std::unique_ptr<testing::ClusterFixture>& fixture = clusters[{replicas, peers}];
  if (fixture == nullptr) {
    ServerOptions options = testing::TestServerOptions();
    options.memory_size = 64u << 20;
    options.built_in_services = {&active_libraries::dht()};  // as ardmad: what replicas apply
    fixture = std::make_unique<testing::ClusterFixture>(
        2, options, /*owners=*/-1, replicas, peers,
        [](const testing::ClusterFixture::Member& m) -> std::shared_ptr<void> {
          return std::make_shared<ReplicaFiller>(ReplicaFillerOptions{
              .self = m.id, .server = m.server, .peers = m.peers, .replication = m.replication});
        });
  }
  if (!fixture->ok()) {
    state.SkipWithError(fixture->why().c_str());
    return;
  }
  cluster::Cluster::Options options;
  options.transport = ucx ? "ucx" : "tcp";
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed =
      cluster::Cluster::Connect(fixture->address(), options);
  if (!routed.ok()) {
    state.SkipWithError(std::string(routed.status().message()).c_str());
    return;
  }
  std::vector<std::string> keys;  // of s0's slots
  std::shared_ptr<const cluster::SlotMap> map = (*routed)->map();
  for (int i = 0; keys.size() < 1000; ++i) {
    if (map->Owner(slots::SlotOf("replicated", Key(i))) == "s0") keys.push_back(Key(i));
  }
  dht::DhtClient dht(routed->get(), Mode::kActive);
  const std::string value = "0123456789abcdef";
  for (const std::string& key : keys) {
    if (!dht.Put("replicated", key, value).ok()) {
      state.SkipWithError("put failed");
      return;
    }
  }
  Client* counted = *(*routed)->ForMember("s0");
  uint64_t rt0 = counted->counters().round_trips;
  uint64_t bytes0 = counted->counters().bytes_sent + counted->counters().bytes_received;
  size_t i = 0;
  for (auto _ : state) {
    const std::string& key = keys[i++ % keys.size()];
    bool ok = get ? dht.Get("replicated", key).ok() : dht.Put("replicated", key, value).ok();
    if (!ok) {
      state.SkipWithError(get ? "get failed" : "put failed");
      break;
    }
  }
  bench::ReportCounters(state, *counted, rt0, bytes0);
}
BENCHMARK(BM_DhtReplicas)
    ->ArgNames({"replicas", "get", "ucx"})
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// N keys "key:<i>" -> "xxx" put in bulk on their owners (dht.import, as a move does).
bool LoadInBulk(testing::ClusterFixture& fixture, int keys) {
  std::vector<std::unique_ptr<Client>> owners = fixture.ClientOfEachServer();
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = fixture.ConnectOverTestTransport();
  if (!routed.ok()) return false;
  std::shared_ptr<const cluster::SlotMap> map = (*routed)->map();
  constexpr int kBatch = 20000;
  for (int first = 0; first < keys; first += kBatch) {
    std::vector<std::string> batch(owners.size());
    std::vector<uint32_t> count(owners.size());
    for (int i = first; i < std::min(keys, first + kBatch); ++i) {
      int s = testing::ClusterFixture::IndexOf(map->Owner(slots::SlotOf("bench", Key(i))));
      wire::ByteWriter w(&batch[s]);
      w.Bytes32(Key(i));
      w.Bytes32("xxx");
      ++count[s];
    }
    for (size_t s = 0; s < owners.size(); ++s) {
      if (count[s] == 0) continue;
      std::string args;
      wire::ByteWriter w(&args);
      w.Str16("bench");
      w.U32(count[s]);
      args.append(batch[s]);
      if (!Invoke(*owners[s], Mode::kActive, active_libraries::dht(), "dht.import", args).ok()) {
        return false;
      }
    }
  }
  return true;
}

void BM_ReshardAdd(benchmark::State& state) {
  const char* env = std::getenv("ARDMA_BENCH_RESHARD_KEYS");
  const int keys = env != nullptr ? std::atoi(env) : 1000000;
  ServerOptions options = testing::TestServerOptions();
  options.memory_size = 1ull << 30;
  testing::ClusterFixture fixture(4, options, /*owners=*/3);
  if (!fixture.ok() || !LoadInBulk(fixture, keys)) {
    state.SkipWithError("cluster or load failed");
    return;
  }
  const std::string add = absl::StrCat(testing::BinDir(), "/ardma --server ", fixture.address(),
                                       " cluster add s3");
  for (auto _ : state) {
    const absl::Time start = absl::Now();
    std::string out;
    if (testing::RunCommand(add, &out) != 0) {
      state.SkipWithError(out.c_str());
      break;
    }
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
  }
  absl::StatusOr<std::unique_ptr<Client>> fourth = fixture.server(3).NewClient();
  absl::StatusOr<uint64_t> moved =
      fourth.ok() ? dht::TableSize(**fourth, "bench") : fourth.status();
  state.counters["keys"] = keys;
  state.counters["keys_moved"] = moved.ok() ? static_cast<double>(*moved) : -1;
  state.counters["slots_moved"] = 4096;
}
BENCHMARK(BM_ReshardAdd)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);

// A Cluster client of `where`, or null with the benchmark skipped saying why.
std::unique_ptr<cluster::Cluster> ConnectOrSkip(benchmark::State& state, const std::string& where) {
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = cluster::Cluster::Connect(where);
  if (!routed.ok()) {
    state.SkipWithError(routed.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(routed);
}

void BM_Failover(benchmark::State& state) {
  constexpr int kKeys = 1000;
  testing::EtcdProcess etcd;
  const std::string where = absl::StrCat("etcd://", etcd.endpoint(), "/failover");
  auto start_member = [&] {
    return std::make_unique<testing::ServerProcess>(std::vector<std::string>{
        "--memory", "64M", "--cluster", where, "--cluster-ttl", "2s"});
  };
  std::vector<std::unique_ptr<testing::ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(start_member());
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd_client =
      cluster::EtcdClient::Connect(etcd.endpoint());
  std::string out;
  if (!etcd_client.ok() ||
      testing::RunCommand(absl::StrCat(testing::BinDir(), "/ardma --server ", where,
                                       " cluster create --replicas 1"),
                          &out) != 0) {
    state.SkipWithError(("cluster create: " + out).c_str());
    return;
  }
  std::unique_ptr<cluster::Cluster> routed = ConnectOrSkip(state, where);
  if (routed == nullptr) return;
  dht::DhtClient dht(routed.get(), Mode::kActive);
  std::map<std::string, std::string> last;
  // Puts every key (each retried until acknowledged: slots being filled are frozen meanwhile).
  auto put_all = [&](int round) {
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = absl::StrCat("k", k), value = absl::StrCat(round, ":", k);
      const absl::Time give_up = absl::Now() + absl::Seconds(60);
      while (!dht.Put("t", key, value).ok()) {
        if (absl::Now() > give_up) return false;
        absl::SleepFor(absl::Milliseconds(5));
      }
      last[key] = value;
    }
    return true;
  };
  if (!put_all(0)) {
    state.SkipWithError("the first puts failed");
    return;
  }
  int round = 0, lost = 0;
  for (auto _ : state) {
    ++round;
    absl::StatusOr<cluster::ClusterView> view = cluster::ReadCluster(**etcd_client, "failover");
    if (!view.ok()) {
      state.SkipWithError(view.status().ToString().c_str());
      break;
    }
    const std::string owner = view->map.map.Owner(slots::SlotOf("t", "k0"));
    size_t victim = servers.size();
    for (const cluster::MemberInfo& m : view->members) {
      for (size_t i = 0; i < servers.size(); ++i) {
        if (m.id == owner && m.addresses.at("tcp") == servers[i]->address()) victim = i;
      }
    }
    if (victim == servers.size()) {
      state.SkipWithError("the owner of k0 is not one of the servers");
      break;
    }
    const absl::Time killed = absl::Now();
    servers[victim]->Kill(SIGKILL);
    const std::string value = absl::StrCat("after-kill-", round);
    while (!dht.Put("t", "k0", value).ok() && absl::Now() - killed < absl::Seconds(60)) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - killed));
    last["k0"] = value;
    for (const auto& [key, expected] : last) {
      absl::StatusOr<std::string> got = dht.Get("t", key);
      if (!got.ok() || *got != expected) ++lost;
    }
    state.PauseTiming();
    servers[victim] = start_member();  // rejoins as a replica, filled before its slots take writes
    if (!put_all(round)) {
      state.SkipWithError("puts after the restart failed");
      break;
    }
    state.ResumeTiming();
  }
  state.counters["ttl_s"] = 2;
  state.counters["keys_lost"] = lost;
}
BENCHMARK(BM_Failover)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);

constexpr int kThroughputKeys = 10000;

void BM_ReplicatedPut(benchmark::State& state) {
  const char* where = std::getenv("ARDMA_BENCH_CLUSTER");
  if (where == nullptr) {
    state.SkipWithError("ARDMA_BENCH_CLUSTER is not set (bench/replicated_compare.sh sets it)");
    return;
  }
  std::unique_ptr<cluster::Cluster> routed = ConnectOrSkip(state, where);
  if (routed == nullptr) return;
  dht::DhtClient dht(routed.get(), Mode::kActive);
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    absl::StatusOr<bool> put = dht.Put("bench", Key(static_cast<int>(i++ % kThroughputKeys)), "xxx");
    if (!put.ok()) {
      state.SkipWithError(put.status().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReplicatedPut)->Threads(16)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_RedisSetWait(benchmark::State& state) {
  const char* masters = std::getenv("ARDMA_BENCH_REDIS");
  if (masters == nullptr) {
    state.SkipWithError("ARDMA_BENCH_REDIS is not set (bench/replicated_compare.sh sets it)");
    return;
  }
  // A connection per master; each key's master learned from the MOVED answers.
  std::map<std::string, std::unique_ptr<bench::RespClient>> by_address;
  auto connection = [&](const std::string& address) -> bench::RespClient* {
    std::unique_ptr<bench::RespClient>& c = by_address[address];
    if (c == nullptr) {
      absl::StatusOr<std::unique_ptr<bench::RespClient>> made = bench::RespClient::Connect(address);
      if (made.ok()) c = *std::move(made);
    }
    return c.get();
  };
  const std::string first(std::string_view(masters).substr(0, std::string_view(masters).find(',')));
  std::vector<bench::RespClient*> owner(kThroughputKeys, nullptr);
  for (int k = 0; k < kThroughputKeys; ++k) {
    bench::RespClient* c = connection(first);
    for (int hop = 0; c != nullptr && hop < 2; ++hop) {
      absl::StatusOr<bench::RespReply> set = c->Command({"SET", Key(k), "xxx"});
      if (set.ok()) break;
      const std::string error(set.status().message());
      const size_t moved = error.find("MOVED ");
      c = moved == std::string::npos ? nullptr
                                     : connection(error.substr(error.rfind(' ') + 1));
    }
    if (c == nullptr) {
      state.SkipWithError(absl::StrCat("cannot SET ", Key(k), " on the Redis Cluster").c_str());
      return;
    }
    owner[k] = c;
  }
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    const int k = static_cast<int>(i++ % kThroughputKeys);
    absl::StatusOr<bench::RespReply> set = owner[k]->Command({"SET", Key(k), "xxx"});
    absl::StatusOr<bench::RespReply> wait =
        set.ok() ? owner[k]->Command({"WAIT", "1", "0"}) : set.status();
    if (!wait.ok() || wait->integer < 1) {
      state.SkipWithError("SET + WAIT 1 0 failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RedisSetWait)->Threads(16)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
