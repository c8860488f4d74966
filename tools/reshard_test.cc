// Resharding under load (docs/cluster.md, "Moving slots"): eight clients put, get and remove over
// 100,000 keys while `ardma cluster add` moves half the slots of two servers to a third. Every
// acknowledged write is read back afterwards, no key is held by two servers, and no client sees
// an error. The clients' maps are deliberately stale (never re-read on a timer): they learn of
// each move only from the fence of the server the slots left — in RDMA mode from its memory.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/client/remote_context.h"
#include "core/cluster/admin.h"
#include "core/cluster/fence.h"
#include "core/cluster/router.h"
#include "core/memory/heap.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "core/wire/byte_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"
#include "services/list/list_client.h"
#include "services/lock/lock_client.h"
#include "services/lock/lock_format.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_mover.h"

namespace ardma {
namespace {

using dht::DhtClient;
using dht::EntriesOf;

constexpr int kClients = 8;
constexpr int kKeys = 100000;

std::string Key(int i) { return absl::StrCat("key", i); }

class DhtReshardTest : public ::testing::TestWithParam<Mode> {};

// One client's share of the keys (i % kClients == c) and what it knows was acknowledged.
struct Worker {
  std::map<int, std::string> model;  // key index -> value; absent: removed (or never put)
  int errors = 0;
  std::string first_error;
  uint64_t ops = 0;
};

void RunWorker(cluster::Cluster& routed, Mode mode, int c, std::atomic<bool>& stop, Worker& w) {
  DhtClient dht(&routed, mode);
  std::mt19937_64 rng(c);
  auto fail = [&](const absl::Status& s, const std::string& what) {
    if (w.errors++ == 0) w.first_error = absl::StrCat(what, ": ", s.ToString());
  };
  while (!stop) {
    int i = static_cast<int>(rng() % (kKeys / kClients)) * kClients + c;
    int op = static_cast<int>(rng() % 10);
    if (op < 4) {
      std::string value = absl::StrCat("v", c, "-", w.ops);
      absl::Status s = dht.Put("t", Key(i), value).status();
      if (s.ok()) {
        w.model[i] = value;
      } else {
        fail(s, "put " + Key(i));
      }
    } else if (op < 5) {
      absl::StatusOr<bool> removed = dht.Remove("t", Key(i));
      if (removed.ok()) {
        if (*removed != w.model.contains(i)) fail(absl::InternalError("wrong answer"), "remove");
        w.model.erase(i);
      } else {
        fail(removed.status(), "remove " + Key(i));
      }
    } else {
      absl::StatusOr<std::string> got = dht.Get("t", Key(i));
      auto it = w.model.find(i);
      if (got.ok() ? (it == w.model.end() || *got != it->second)
                   : !(absl::IsNotFound(got.status()) && it == w.model.end())) {
        fail(got.status(), absl::StrCat("get ", Key(i), " (expected ",
                                        it == w.model.end() ? "absent" : it->second, ")"));
      }
    }
    ++w.ops;
  }
}

TEST_P(DhtReshardTest, AddingAServerUnderLoadLosesNothingAndNeverSplitsAKey) {
  testing::ClusterFixture fixture(3, 64u << 20, /*owners=*/2);
  ASSERT_TRUE(fixture.ok()) << fixture.why();
  // Two connections to the cluster, four client threads on each (eight UCX workers polling on a
  // 2-core machine starve the servers).
  std::vector<std::unique_ptr<cluster::Cluster>> connections;
  for (int c = 0; c < 2; ++c) {
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed =
        fixture.ConnectOverTestTransport(/*refresh_interval=*/absl::ZeroDuration());
    ASSERT_TRUE(routed.ok()) << routed.status();
    connections.push_back(*std::move(routed));
  }
  std::vector<cluster::Cluster*> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(connections[c % 2].get());
  std::vector<Worker> workers(kClients);
  {  // Every key there at the start, put in bulk on its owner (dht.import, as a move does).
    std::vector<std::unique_ptr<Client>> owners = fixture.ClientOfEachServer();
    std::shared_ptr<const cluster::SlotMap> map = connections[0]->map();
    std::vector<std::string> batches(2);
    std::vector<uint32_t> counts(2);
    for (int i = 0; i < kKeys; ++i) {
      std::string value = absl::StrCat("first", i);
      int s = testing::ClusterFixture::IndexOf(map->Owner(slots::SlotOf("t", Key(i))));
      wire::ByteWriter w(&batches[s]);
      w.Bytes32(Key(i));
      w.Bytes32(value);
      ++counts[s];
      workers[i % kClients].model[i] = value;
    }
    for (int s = 0; s < 2; ++s) {
      std::string args;
      wire::ByteWriter w(&args);
      w.Str16("t");
      w.U32(counts[s]);
      args.append(batches[s]);
      ASSERT_TRUE(
          Invoke(*owners[s], Mode::kActive, ardma::active_libraries::dht(), "dht.import", args).ok());
    }
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int c = 0; c < kClients; ++c) {
    load.emplace_back([&, c] { RunWorker(*clients[c], GetParam(), c, stop, workers[c]); });
  }
  uint64_t ops_before = 0;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        ops_before = 0;
        for (const Worker& w : workers) ops_before += w.ops;
        return ops_before > 2000;
      },
      absl::Seconds(30)));
  std::string out;
  int status = testing::RunCommand(
      absl::StrCat(testing::BinDir(), "/ardma --server ", fixture.address(), " cluster add s2"),
      &out);
  EXPECT_EQ(status, 0) << out;
  RecordProperty("rebalance", out);
  // Load goes on a while on the new map (and the stale one, until redirected).
  uint64_t ops_after = ops_before;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        uint64_t ops = 0;
        for (const Worker& w : workers) ops += w.ops;
        ops_after = ops;
        return ops > ops_before * 2 + 2000;
      },
      absl::Seconds(60)));
  stop = true;
  for (std::thread& t : load) t.join();
  connections.clear();  // (their UCX workers poll)
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(workers[c].errors, 0) << "client " << c << ": " << workers[c].first_error;
  }

  // The map: s2 has a third of the slots, at a later epoch.
  cluster::StoredMap stored = *cluster::ReadMap(fixture.etcd(), "c1");
  EXPECT_GT(stored.map.epoch(), 1u);
  EXPECT_EQ(stored.map.SlotCount("s2"), 5461u);
  // Each key on exactly one server, the one the map names, with the last acknowledged value (read
  // from every server's memory in bulk).
  std::vector<std::unique_ptr<Client>> direct = fixture.ClientOfEachServer();
  std::map<std::string, std::vector<std::string>> stored_values;  // key -> its copies' values
  for (int s = 0; s < 3; ++s) {
    auto entries = EntriesOf(*direct[s], "t");
    ASSERT_TRUE(entries.ok()) << entries.status();
    for (const auto& [key, value] : *entries) {
      stored_values[key].push_back(value);
      EXPECT_EQ(stored.map.Owner(slots::SlotOf("t", key)), absl::StrCat("s", s)) << key;
    }
  }
  size_t expected = 0;
  for (int c = 0; c < kClients; ++c) {
    expected += workers[c].model.size();
    for (const auto& [i, value] : workers[c].model) {
      ASSERT_EQ(stored_values[Key(i)], std::vector<std::string>{value}) << Key(i);
    }
  }
  EXPECT_EQ(stored_values.size(), expected) << "keys nobody acknowledged, or removed ones, are there";
  // And through a client: a sample of keys, and the size.
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> fresh = fixture.ConnectOverTestTransport();
  ASSERT_TRUE(fresh.ok());
  DhtClient check(fresh->get(), GetParam());
  for (int i = 0; i < kKeys; i += 97) {
    auto it = workers[i % kClients].model.find(i);
    absl::StatusOr<std::string> got = check.Get("t", Key(i));
    if (it == workers[i % kClients].model.end()) {
      EXPECT_TRUE(absl::IsNotFound(got.status())) << Key(i) << ": " << got.status();
    } else {
      ASSERT_TRUE(got.ok()) << Key(i) << ": " << got.status();
      EXPECT_EQ(*got, it->second) << Key(i);
    }
  }
  EXPECT_EQ(*check.Size("t"), expected);
}

// Puts keys "k0".."k<n-1>" (value "v<i>") through `routed`.
void PutKeys(cluster::Cluster& routed, int n) {
  DhtClient dht(&routed, Mode::kActive);
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(dht.Put("t", absl::StrCat("k", i), absl::StrCat("v", i)).ok()) << i;
  }
}

// Every key back, each on the one server the map names.
void ExpectKeysWhereTheMapSays(testing::ClusterFixture& fixture, int n) {
  absl::StatusOr<cluster::StoredMap> stored = cluster::ReadMap(fixture.etcd(), "c1");
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::vector<std::unique_ptr<Client>> direct = fixture.ClientOfEachServer();
  std::map<std::string, std::vector<std::string>> copies;
  for (int s = 0; s < 3; ++s) {
    auto entries = EntriesOf(*direct[s], "t");
    if (absl::IsNotFound(entries.status())) continue;  // a server that never had a key
    ASSERT_TRUE(entries.ok()) << entries.status();
    for (const auto& [key, value] : *entries) {
      copies[key].push_back(value);
      EXPECT_EQ(stored->map.Owner(slots::SlotOf("t", key)), absl::StrCat("s", s)) << key;
    }
  }
  ASSERT_EQ(copies.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(copies[absl::StrCat("k", i)], std::vector<std::string>{absl::StrCat("v", i)});
  }
}

std::string Ardma(const testing::ClusterFixture& fixture, const std::string& command) {
  return absl::StrCat(testing::BinDir(), "/ardma --server ", fixture.address(), " ", command);
}

// Three servers, the slots over the first two, and a client of the cluster.
class ReshardAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fixture.ok()) << fixture.why();
    routed = fixture.ConnectOverTestTransport();
    ASSERT_TRUE(routed.ok()) << routed.status();
  }
  testing::ClusterFixture fixture{3, 32u << 20, /*owners=*/2};
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed;
};

// A file system's namespace and its files' bytes do not move with their slots yet: a rebalance
// keeps those slots where they are (and says so), moves the rest, and every file reads back.
TEST_F(ReshardAdminTest, ARebalanceKeepsTheSlotsOfAFileSystemAndLosesNoFile) {
  dfs::DfsClient fs(routed->get(), Mode::kActive);
  ASSERT_TRUE(fs.Mkdir("/d").ok());
  constexpr int kFiles = 200;
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_TRUE(fs.WriteFile(absl::StrCat("/d/f", i), std::string(1000 + i, 'a' + i % 26)).ok());
  }
  PutKeys(**routed, 3000);
  const std::string namespace_owner =
      cluster::ReadMap(fixture.etcd(), "c1")->map.Owner(dfs::NamespaceSlot("default"));
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster add s2"), &out), 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("which do not move yet"));
  cluster::StoredMap after = *cluster::ReadMap(fixture.etcd(), "c1");
  EXPECT_GT(after.map.epoch(), 1u);  // the other slots moved
  EXPECT_EQ(after.map.Owner(dfs::NamespaceSlot("default")), namespace_owner);
  for (int i = 0; i < kFiles; ++i) {
    absl::StatusOr<dfs::Stat> st = fs.Lookup(absl::StrCat("/d/f", i));
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_NE(after.map.Owner(dfs::DataSlot("default", st->ino)), "s2") << i;
    absl::StatusOr<std::string> back = fs.ReadFile(absl::StrCat("/d/f", i));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, std::string(1000 + i, 'a' + i % 26));
  }
  absl::Status after_move = fs.WriteFile("/d/after", "made after the move");
  ASSERT_TRUE(after_move.ok()) << after_move;
  EXPECT_EQ(*fs.ReadFile("/d/after"), "made after the move");
}

// The admin lock: a rebalance while another administrator holds the cluster fails and changes
// nothing; two started at once: the map ends even and consistent, every key where it says.
TEST_F(ReshardAdminTest, TwoAdministratorsAtOnceOneWinsAndTheMapStaysConsistent) {
  PutKeys(**routed, 3000);
  std::string out;
  {
    absl::StatusOr<std::unique_ptr<cluster::AdminLock>> held =
        cluster::AdminLock::Acquire(fixture.etcd(), "c1", "the test");
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster rebalance"), &out), 1);
    EXPECT_THAT(out, ::testing::HasSubstr("another administrator is changing cluster c1 (the test)"));
    EXPECT_EQ(cluster::ReadMap(fixture.etcd(), "c1")->map.epoch(), 1u);  // nothing moved
  }
  const std::string rebalance = Ardma(fixture, "cluster rebalance");
  EXPECT_EQ(testing::RunCommand("(" + rebalance + " 2>&1; echo status $?) > /tmp/reshard_a.$$ & (" +
                                    rebalance + " 2>&1; echo status $?) > /tmp/reshard_b.$$ & " +
                                    "wait; cat /tmp/reshard_a.$$ /tmp/reshard_b.$$; " +
                                    "rm -f /tmp/reshard_a.$$ /tmp/reshard_b.$$",
                                &out),
            0);
  RecordProperty("admins", out);
  // One moved the slots; the other was refused, or (if it started after) found them even.
  size_t moves = 0;
  for (size_t at = out.find("-> s2"); at != std::string::npos; at = out.find("-> s2", at + 1)) {
    ++moves;
  }
  EXPECT_EQ(moves, 2u) << out;
  EXPECT_TRUE(absl::StrContains(out, "status 1") ? absl::StrContains(out, "another administrator")
                                                 : absl::StrContains(out, "even already"))
      << out;
  absl::StatusOr<cluster::StoredMap> stored = cluster::ReadMap(fixture.etcd(), "c1");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->map.epoch(), 3u);
  EXPECT_EQ(stored->map.SlotCount("s2"), 5461u);
  ExpectKeysWhereTheMapSays(fixture, 3000);
}

// A server serves a lock only if it owns the lock's slot: asked directly for another's, it
// answers the redirect (OneServer reports it), in both modes, and grants nothing there.
TEST_F(ReshardAdminTest, AServerServesNoLockOfASlotItDoesNotOwn) {
  std::shared_ptr<const cluster::SlotMap> map = (*routed)->map();
  std::string name = "elsewhere";
  for (int i = 0; map->Owner(slots::SlotOf(lock::kLockSpace, name)) != "s0"; ++i) {
    name = absl::StrCat("elsewhere", i);
  }
  std::vector<std::unique_ptr<Client>> members = fixture.ClientOfEachServer();
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    lock::LockClient wrong(members[1].get(), mode);
    absl::StatusOr<lock::Grant> g =
        wrong.Acquire(name, lock::LockMode::kExclusive, absl::Seconds(5));
    EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition) << g.status();
    EXPECT_THAT(g.status().message(), ::testing::HasSubstr("connect with the cluster's etcd://"));
  }
  lock::LockClient right(routed->get(), Mode::kRdma);
  absl::StatusOr<lock::Grant> g = right.Acquire(name, lock::LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->token, 1u);
}

// etcd away: running clients go on with their cached map, without an error; admin commands say
// etcd is unreachable and change nothing.
TEST_F(ReshardAdminTest, WithEtcdStoppedClientsKeepWorkingAndAdminCommandsFailClearly) {
  PutKeys(**routed, 1000);
  fixture.etcd_process().Kill(SIGKILL);
  DhtClient dht(routed->get(), Mode::kActive);
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<std::string> got = dht.Get("t", absl::StrCat("k", i));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, absl::StrCat("v", i));
    ASSERT_TRUE(dht.Put("t", absl::StrCat("k", i), absl::StrCat("v", i)).ok());
  }
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster add s2"), &out), 1);
  EXPECT_THAT(out, ::testing::HasSubstr("is unreachable"));
  ASSERT_TRUE(fixture.etcd_process().Restart());
  ExpectKeysWhereTheMapSays(fixture, 1000);
  EXPECT_EQ(cluster::ReadMap(fixture.etcd(), "c1")->map.epoch(), 1u);
}

// What a mover that died mid-move leaves: slots frozen on their owner (writes wait) and copies on
// a server that does not own them. `cluster fix` makes writes go through again and drops the
// stray copies; every key is intact.
TEST_F(ReshardAdminTest, FixRepairsWhatADeadMoverLeft) {
  PutKeys(**routed, 1000);
  std::vector<std::unique_ptr<Client>> direct = fixture.ClientOfEachServer();
  std::shared_ptr<const cluster::SlotMap> map = (*routed)->map();
  const std::string key = "k7";
  const uint32_t slot = slots::SlotOf("t", key);
  const int owner = testing::ClusterFixture::IndexOf(map->Owner(slot));
  {  // The dead mover's work: the slot frozen on its owner, the key copied to s2.
    RemoteContext ctx(direct[owner].get(), {});
    absl::StatusOr<uint64_t> fence = heap::GetRoot(ctx, slots::kFenceRoot);
    ASSERT_TRUE(fence.ok());
    ASSERT_TRUE(cluster::WriteFence(ctx, *fence, {slot},
                                    slots::FenceWord(slots::SlotState::kFrozen, 2), 0)
                    .ok());
    std::string args;
    wire::ByteWriter w(&args);
    w.Str16("t");
    w.U32(1);
    w.Bytes32(key);
    w.Bytes32("v7");
    ASSERT_TRUE(Invoke(*direct[2], Mode::kActive, ardma::active_libraries::dht(), "dht.import", args)
                    .ok());
  }
  DhtClient impatient(routed->get(), Mode::kActive, {.timeout = absl::Milliseconds(300)});
  EXPECT_EQ(impatient.Put("t", key, "new").status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*impatient.Get("t", key), "v7");  // reads go on
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster fix"), &out), 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("s2: 0 slots served again, 0 marked moved, 1 stray keys"));
  ASSERT_TRUE(impatient.Put("t", key, "v7").ok());
  ExpectKeysWhereTheMapSays(fixture, 1000);
}

// A name of namespace `space` whose slot `cluster add s2` gives to s2.
std::string NameThatMoves(const cluster::SlotMap& map, std::string_view space, std::string name) {
  std::set<uint32_t> moving;
  absl::StatusOr<std::vector<cluster::Move>> plan = cluster::PlanRebalance(map, {"s0", "s1", "s2"});
  EXPECT_TRUE(plan.ok()) << plan.status();
  for (const cluster::Move& move : plan.value_or(std::vector<cluster::Move>{})) {
    moving.insert(move.slots.begin(), move.slots.end());
  }
  const std::string base = name;
  for (int i = 0; !moving.empty() && !moving.contains(slots::SlotOf(space, name)); ++i) {
    name = absl::StrCat(base, i);
  }
  return name;
}

std::string OwnerOf(testing::ClusterFixture& fixture, const std::string& name,
                    std::string_view space = lock::kLockSpace) {
  absl::StatusOr<cluster::StoredMap> stored = cluster::ReadMap(fixture.etcd(), "c1");
  EXPECT_TRUE(stored.ok()) << stored.status();
  return stored.ok() ? stored->map.Owner(slots::SlotOf(space, name)) : "";
}

// A lock contended by eight clients while its slot moves: the mover seals it, the tickets taken
// before drain on the old server, and the rest go on on the new one. Grants stay first come first
// served, holders never overlap, and the tokens and tickets go on counting across the move.
TEST(ReshardLockTest, AContendedLockStaysFairAndExclusiveWhileItsSlotMoves) {
  testing::ClusterFixture fixture(3, 32u << 20, /*owners=*/2);
  ASSERT_TRUE(fixture.ok()) << fixture.why();
  std::vector<std::unique_ptr<cluster::Cluster>> connections;
  for (int c = 0; c < 2; ++c) connections.push_back(*fixture.ConnectOverTestTransport());
  const std::string name = NameThatMoves(*connections[0]->map(), lock::kLockSpace, "contended");
  std::atomic<bool> stop{false}, inside{false};
  std::atomic<int> overlaps{0}, errors{0}, grants_made{0};
  absl::Mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> grants;  // token, ticket
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      lock::LockClient locks(connections[c % 2].get(), c % 2 ? Mode::kRdma : Mode::kActive);
      while (!stop) {
        absl::StatusOr<lock::Grant> g =
            locks.Acquire(name, lock::LockMode::kExclusive, absl::Seconds(30));
        if (!g.ok()) {
          ++errors;
          continue;
        }
        if (inside.exchange(true)) ++overlaps;
        {
          absl::MutexLock hold(&mu);
          grants.push_back({g->token, g->ticket});
        }
        ++grants_made;
        inside = false;
        if (!locks.Release(*g).ok()) ++errors;
      }
    });
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return grants_made > 200; }, absl::Seconds(30)));
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster add s2"), &out), 0) << out;
  const int after_move = grants_made;
  EXPECT_TRUE(testing::WaitUntil([&] { return grants_made > after_move + 200; }, absl::Seconds(30)));
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(overlaps, 0);
  std::sort(grants.begin(), grants.end());
  for (size_t i = 1; i < grants.size(); ++i) {
    EXPECT_EQ(grants[i].first, grants[i - 1].first + 1) << "a token given twice or skipped";
    EXPECT_GT(grants[i].second, grants[i - 1].second) << "granted out of ticket order";
  }
  EXPECT_EQ(OwnerOf(fixture, name), "s2");
  EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr("kept")));
}

// Three servers, the slots over the first two, and two clients of the cluster: one that follows
// the map, and one whose map stays as it was when it connected.
class TwoClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fixture.ok()) << fixture.why();
    routed = *fixture.ConnectOverTestTransport();
    stale = *fixture.ConnectOverTestTransport(/*refresh_interval=*/absl::ZeroDuration());
  }
  testing::ClusterFixture fixture{3, 32u << 20, /*owners=*/2};
  std::unique_ptr<cluster::Cluster> routed, stale;
};
class ReshardHeldLockTest : public TwoClientsTest {};
class ReshardListTest : public TwoClientsTest {};
class ReshardUndoTest : public TwoClientsTest {};

// A lock held for longer than --lock-wait keeps its slot where it is (and its holder keeps it);
// freed, it moves with the next rebalance, and clients whose map is stale follow it there, in both
// modes, with its tokens still counting up.
TEST_F(ReshardHeldLockTest, ALockHeldThroughTheWaitKeepsItsSlotAndMovesOnceFree) {
  const std::string name = NameThatMoves(*routed->map(), lock::kLockSpace, "held");
  const std::string owner_before = OwnerOf(fixture, name);
  lock::LockClient holder(routed.get(), Mode::kActive);
  absl::StatusOr<lock::Grant> held = holder.Acquire(name, lock::LockMode::kExclusive,
                                                    absl::Seconds(5), absl::Seconds(60));
  ASSERT_TRUE(held.ok()) << held.status();
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "--lock-wait 300ms cluster add s2"), &out), 0)
      << out;
  EXPECT_THAT(out, ::testing::HasSubstr("1 slots kept: a lock in them stayed busy for 300ms"));
  EXPECT_EQ(OwnerOf(fixture, name), owner_before);
  ASSERT_TRUE(holder.Release(*held).ok());
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster rebalance"), &out), 0) << out;
  EXPECT_EQ(OwnerOf(fixture, name), "s2");
  uint64_t token = held->token;
  for (Mode mode : {Mode::kActive, Mode::kRdma, Mode::kActive}) {
    lock::LockClient locks(stale.get(), mode);
    absl::StatusOr<lock::Grant> g =
        locks.Acquire(name, lock::LockMode::kExclusive, absl::Seconds(5));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->token, ++token);
    ASSERT_TRUE(locks.Release(*g).ok());
  }
}

// A list whose slot moves while four clients append (in both modes, two of them with a map that
// goes stale) and one removes from the front: no acknowledged append is lost or doubled, each
// writer's values keep their order, nobody sees an error, and the list ends on the new server.
TEST_F(ReshardListTest, AListMovesWhileClientsAppendAndRemoveAndLosesNothing) {
  const std::string name = NameThatMoves(*routed->map(), list::kListSpace, "queue");
  constexpr int kWriters = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::atomic<int64_t>> appended(kWriters);  // acknowledged, per writer
  std::vector<int64_t> removed;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      list::ListClient lists(w < 2 ? routed.get() : stale.get(),
                             w % 2 ? Mode::kRdma : Mode::kActive);
      for (int64_t i = 0; !stop; ++i) {
        absl::Status s = lists.Append(name, w * 1000000 + i);
        if (!s.ok()) {
          ADD_FAILURE() << s;
          ++errors;
          return;
        }
        appended[w] = i + 1;
      }
    });
  }
  threads.emplace_back([&] {
    list::ListClient lists(stale.get(), Mode::kRdma);
    while (!stop) {
      absl::StatusOr<list::ListValue> v = lists.Remove(name, 0);
      if (v.ok()) {
        removed.push_back(std::get<int64_t>(*v));
      } else if (!absl::IsNotFound(v.status()) && !absl::IsOutOfRange(v.status())) {
        ADD_FAILURE() << v.status();
        ++errors;
        return;
      }
    }
  });
  auto total = [&] {
    int64_t n = 0;
    for (int w = 0; w < kWriters; ++w) n += appended[w];
    return n;
  };
  ASSERT_TRUE(testing::WaitUntil([&] { return total() > 300; }, absl::Seconds(30)));
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster add s2"), &out), 0) << out;
  const int64_t at_move = total();
  EXPECT_TRUE(testing::WaitUntil([&] { return total() > at_move + 300; }, absl::Seconds(30)));
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(OwnerOf(fixture, name, list::kListSpace), "s2");
  list::ListClient check(routed.get(), Mode::kActive);
  absl::StatusOr<std::vector<list::ListValue>> rest = check.ReadAll(name);
  ASSERT_TRUE(rest.ok()) << rest.status();
  std::vector<int64_t> seen = removed;
  for (const list::ListValue& v : *rest) seen.push_back(std::get<int64_t>(v));
  EXPECT_EQ(static_cast<int64_t>(seen.size()), total());
  std::vector<int64_t> next(kWriters, 0);
  for (int64_t v : seen) {
    int w = static_cast<int>(v / 1000000);
    ASSERT_EQ(v % 1000000, next[w]) << "writer " << w << "'s values out of order, lost or doubled";
    ++next[w];
  }
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(next[w], appended[w]);
}

// A move that fails midway (the receiver's memory is full) is undone: the command says why, the
// map does not change, and the giver serves the slots again — its keys, its sealed lock and its
// sealed list take changes again, in both modes, with nothing lost.
TEST_F(ReshardUndoTest, AMoveThatFailsMidwayLeavesEverythingServedWhereItWas) {
  PutKeys(*routed, 2000);
  absl::StatusOr<std::vector<cluster::Move>> plan =
      cluster::PlanRebalance(*routed->map(), {"s0", "s1", "s2"});
  ASSERT_TRUE(plan.ok() && !plan->empty()) << plan.status();
  const std::set<uint32_t> first((*plan)[0].slots.begin(), (*plan)[0].slots.end());
  auto name_in_first = [&](std::string_view space, std::string name) {
    for (int i = 0; !first.contains(slots::SlotOf(space, name)); ++i) name = absl::StrCat("n", i);
    return name;
  };
  const std::string lock_name = name_in_first(lock::kLockSpace, "l");
  const std::string list_name = name_in_first(list::kListSpace, "q");
  lock::LockClient locks(routed.get(), Mode::kRdma);
  ASSERT_TRUE(locks.Release(*locks.Acquire(lock_name, lock::LockMode::kExclusive,
                                           absl::Seconds(5))).ok());
  list::ListClient lists(routed.get(), Mode::kActive);
  for (int64_t v : {1, 2, 3}) ASSERT_TRUE(lists.Append(list_name, v).ok());
  // Fill the receiver's memory.
  std::unique_ptr<Client> receiver = std::move(fixture.ClientOfEachServer()[2]);
  RemoteContext rctx(receiver.get(), {});
  ASSERT_TRUE(cluster::OpenFence(rctx).ok());
  for (uint64_t size = 64 << 10; size >= 16; size /= 4) {
    while (heap::Allocate(rctx, size).ok()) {
    }
  }
  std::string out;
  EXPECT_EQ(testing::RunCommand(Ardma(fixture, "cluster add s2"), &out), 1) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("RESOURCE_EXHAUSTED"));  // in step 2, after the seals
  EXPECT_EQ(cluster::ReadMap(fixture.etcd(), "c1")->map.epoch(), 1u);
  ExpectKeysWhereTheMapSays(fixture, 2000);
  for (cluster::Cluster* c : {routed.get(), stale.get()}) {
    for (Mode mode : {Mode::kActive, Mode::kRdma}) {
      DhtClient dht(c, mode);
      for (int i = 0; i < 2000; i += 41) {
        EXPECT_TRUE(dht.Put("t", absl::StrCat("k", i), absl::StrCat("v", i)).ok()) << i;
      }
      lock::LockClient l(c, mode);
      absl::StatusOr<lock::Grant> g = l.Acquire(lock_name, lock::LockMode::kExclusive,
                                                absl::Seconds(5));
      ASSERT_TRUE(g.ok()) << g.status();
      ASSERT_TRUE(l.Release(*g).ok());
      ASSERT_TRUE(list::ListClient(c, mode).Append(list_name, int64_t{4}).ok());
    }
  }
  EXPECT_EQ(locks.Inspect(lock_name)->tokens_issued, 5u);
  absl::StatusOr<std::vector<list::ListValue>> all = lists.ReadAll(list_name);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 7u);
  ExpectKeysWhereTheMapSays(fixture, 2000);
}

INSTANTIATE_TEST_SUITE_P(Modes, DhtReshardTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

}  // namespace
}  // namespace ardma
