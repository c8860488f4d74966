// Failover under fire, in the style of Jepsen (docs/cluster.md, "Failover"): three ardmad
// processes and a real etcd, `cluster create --replicas 1` (and 2); eight client threads put unique
// values to and get 1,000 keys, every operation logged with when it began and ended, while a
// nemesis SIGKILLs the primary of a busy key three times (restarting it from its memory file once
// etcd dropped it — or as a new, empty server: it joins as a replica and is filled) and SIGSTOPs
// a primary for longer than its lease (SIGCONT: it must take no write, and ends). A checker
// then proves from the log:
//   - every acknowledged write is readable afterwards: each key's final value is the value of a
//     write that no acknowledged write of the key followed (in real time), and present if any was
//     acknowledged;
//   - no read returned a value older than one acknowledged before the read began;
//   - the stopped primary acknowledged nothing after its lease ran out (a write sent to it
//     directly after SIGCONT is refused), so no two primaries acknowledged writes of one slot.
// A put that failed may or may not have been made (its primary ran it; a replica did not confirm
// it): it may explain a read, but is never required.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "core/cluster/admin.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/router.h"
#include "core/testing/etcd_process.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"

namespace ardma {
namespace {

constexpr int kClients = 8;
constexpr int kKeys = 1000;
constexpr char kTable[] = "jepsen";

struct Op {
  bool put = false;
  int key = 0;
  std::string value;  // put: written; get: read ("" = absent)
  absl::Time start, end;
  bool ok = false;  // put: acknowledged; get: answered
};

std::string KeyName(int key) { return absl::StrCat("key", key); }

class History {
 public:
  void Add(Op op) {
    absl::MutexLock lock(&mu_);
    ops_.push_back(std::move(op));
  }
  std::vector<Op> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(ops_);
  }

 private:
  absl::Mutex mu_;
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
};

// The checker: what the log and the final reads prove, as a list of violations (empty: none).
std::vector<std::string> Check(const std::vector<Op>& ops,
                               const std::map<int, std::string>& final_values) {
  std::map<std::string, const Op*> write_of;       // value -> its put
  std::map<int, std::vector<const Op*>> acked;     // key -> its acknowledged puts
  for (const Op& op : ops) {
    if (!op.put) continue;
    write_of[op.value] = &op;
    if (op.ok) acked[op.key].push_back(&op);
  }
  std::vector<std::string> violations;
  // Whether an acknowledged put of `key` followed `w` (began after it ended) and ended before
  // `before`.
  auto superseded = [&](int key, const Op* w, absl::Time before) {
    auto puts = acked.find(key);
    if (puts == acked.end()) return static_cast<const Op*>(nullptr);
    for (const Op* later : puts->second) {
      if (later != w && later->end < before && (w == nullptr || later->start > w->end)) {
        return later;
      }
    }
    return static_cast<const Op*>(nullptr);
  };
  for (const Op& op : ops) {
    if (op.put || !op.ok) continue;
    const Op* w = nullptr;
    if (!op.value.empty()) {
      auto it = write_of.find(op.value);
      if (it == write_of.end() || it->second->key != op.key) {
        violations.push_back(absl::StrCat(KeyName(op.key), " read ", op.value,
                                          ", which no put of it wrote"));
        continue;
      }
      w = it->second;
    }
    if (const Op* newer = superseded(op.key, w, op.start)) {
      violations.push_back(absl::StrCat(
          "stale read of ", KeyName(op.key), " at ", absl::FormatTime("%H:%M:%E3S", op.start,
                                                                      absl::UTCTimeZone()),
          ": ", op.value.empty() ? "absent" : op.value, ", though ", newer->value,
          " was acknowledged before the read began (at ",
          absl::FormatTime("%H:%M:%E3S", newer->end, absl::UTCTimeZone()), ")"));
    }
  }
  for (const auto& [key, puts] : acked) {
    auto it = final_values.find(key);
    if (it == final_values.end() || it->second.empty()) {
      violations.push_back(absl::StrCat(KeyName(key), " lost: ", puts.size(),
                                        " acknowledged puts, and it reads absent"));
      continue;
    }
    auto w = write_of.find(it->second);
    if (w == write_of.end()) {
      violations.push_back(absl::StrCat(KeyName(key), " reads ", it->second, ", never written"));
    } else if (const Op* newer = superseded(key, w->second, absl::InfiniteFuture())) {
      violations.push_back(absl::StrCat("lost write of ", KeyName(key), ": it reads ",
                                        it->second, ", though ", newer->value,
                                        " was acknowledged after that was written"));
    }
  }
  return violations;
}

TEST(FailoverCheckerTest, FindsStaleReadsAndLostWrites) {
  const absl::Time t0 = absl::Now();
  auto at = [&](int ms) { return t0 + absl::Milliseconds(ms); };
  std::vector<Op> ops = {
      {.put = true, .key = 1, .value = "a", .start = at(0), .end = at(1), .ok = true},
      {.put = true, .key = 1, .value = "b", .start = at(2), .end = at(3), .ok = true},
      {.put = true, .key = 1, .value = "c", .start = at(2), .end = at(9), .ok = false},
      {.put = false, .key = 1, .value = "a", .start = at(1), .end = at(2), .ok = true},  // fine
      {.put = false, .key = 1, .value = "c", .start = at(4), .end = at(5), .ok = true},  // fine
  };
  EXPECT_TRUE(Check(ops, {{1, "b"}}).empty());
  EXPECT_TRUE(Check(ops, {{1, "c"}}).empty()) << "an unacknowledged put may have been made";
  EXPECT_EQ(Check(ops, {{1, "a"}}).size(), 1u) << "b was acknowledged after a: a lost write";
  EXPECT_EQ(Check(ops, {}).size(), 1u) << "absent: lost";
  ops.push_back({.put = false, .key = 3, .value = "", .start = at(4), .end = at(5), .ok = true});
  EXPECT_TRUE(Check(ops, {{1, "b"}}).empty()) << "a key never written may read absent, and stay";
  ops.push_back({.put = false, .key = 1, .value = "a", .start = at(4), .end = at(5), .ok = true});
  EXPECT_EQ(Check(ops, {{1, "b"}}).size(), 1u) << "a read after b's acknowledgement saw a";
  ops.push_back({.put = false, .key = 2, .value = "zz", .start = at(4), .end = at(5), .ok = true});
  EXPECT_EQ(Check(ops, {{1, "b"}}).size(), 2u) << "a value nobody wrote";
}

// The parameters: whether a member killed (or ended) is restarted from its memory file — the
// same id, its keys as they were — or as a new, empty server; and the replicas per slot (with 2,
// the old primary's last write may reach one replica and not the one promoted).
struct Faults {
  bool from_memory_files = false;
  int replicas = 1;
};
class FailoverTest : public ::testing::TestWithParam<Faults> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
    etcd_client_ = *cluster::EtcdClient::Connect(etcd_.endpoint());
    for (int i = 0; i < 3; ++i) {
      heaps_.push_back(testing::TempPath(absl::StrCat("jepsen_member", i)));
      std::filesystem::remove(heaps_.back());
      servers_.push_back(Start(i));
      ASSERT_FALSE(servers_.back()->address().empty());
    }
  }
  void TearDown() override {
    servers_.clear();
    for (const std::string& heap : heaps_) std::filesystem::remove(heap);
  }
  std::unique_ptr<testing::ServerProcess> Start(int i) {
    std::string heap = heaps_[i];
    if (!GetParam().from_memory_files && servers_.size() == 3) {  // a restart, as a new server
      heaps_.push_back(testing::TempPath(absl::StrCat("jepsen_member", i, "_", heaps_.size())));
      heap = heaps_.back();
      std::filesystem::remove(heap);
    }
    return std::make_unique<testing::ServerProcess>(std::vector<std::string>{
        "--memory-file", heap, "--memory", "32M", "--cluster", Where(), "--cluster-ttl", "2s"});
  }
  // Whether the server listening at `address` is a member.
  bool RegisteredAt(const std::string& address) {
    absl::StatusOr<std::vector<cluster::MemberInfo>> members =
        cluster::ListMembers(*etcd_client_, "j");
    return members.ok() &&
           std::any_of(members->begin(), members->end(), [&](const cluster::MemberInfo& m) {
             return m.addresses.at("tcp") == address;
           });
  }
  std::string Where() const { return absl::StrCat("etcd://", etcd_.endpoint(), "/j"); }
  // The index of the server that owns `key` now, and its member id (-1 if unknown).
  std::pair<int, std::string> OwnerOf(const std::string& key) {
    absl::StatusOr<cluster::ClusterView> view = cluster::ReadCluster(*etcd_client_, "j");
    if (!view.ok()) return {-1, ""};
    const std::string owner = view->map.map.Owner(cluster::SlotOf(kTable, key));
    for (const cluster::MemberInfo& m : view->members) {
      if (m.id != owner) continue;
      for (size_t i = 0; i < servers_.size(); ++i) {
        if (servers_[i] != nullptr && m.addresses.at("tcp") == servers_[i]->address()) {
          return {static_cast<int>(i), owner};
        }
      }
    }
    return {-1, owner};
  }
  // What keeps the cluster from surviving the next fault ("" if nothing): every owner must have
  // replicas, each recorded filled (in sync) by its owner. The nemesis strikes only then. A fault
  // before that finds a primary whose only other copy lacks writes, and its slots rightly stay
  // down until it returns (a new server never does).
  std::string NotRedundant() {
    absl::StatusOr<cluster::ClusterView> view = cluster::ReadCluster(*etcd_client_, "j");
    if (!view.ok()) return view.status().ToString();
    const std::string prefix = cluster::SyncedPrefix("j");
    absl::StatusOr<std::vector<cluster::KeyValue>> synced = etcd_client_->GetPrefix(prefix);
    if (!synced.ok()) return synced.status().ToString();
    std::set<std::string> pairs;
    for (const cluster::KeyValue& kv : *synced) pairs.insert(kv.key.substr(prefix.size()));
    const cluster::SlotMap& map = view->map.map;
    for (const std::string& owner : map.Servers()) {
      const std::vector<std::string> replicas = map.ReplicasOf(owner);
      if (replicas.empty()) return absl::StrCat(owner, " has no replica");
      for (const std::string& replica : replicas) {
        if (!pairs.contains(absl::StrCat(owner, "/", replica))) {
          return absl::StrCat(owner, " has not filled its replica ", replica, " (map epoch ",
                              map.epoch(), "; in sync: ", absl::StrJoin(pairs, " "), ")");
        }
      }
    }
    return "";
  }
  bool Registered(const std::string& id) {
    absl::StatusOr<std::vector<cluster::MemberInfo>> members =
        cluster::ListMembers(*etcd_client_, "j");
    return members.ok() && std::any_of(members->begin(), members->end(),
                                       [&](const cluster::MemberInfo& m) { return m.id == id; });
  }

  testing::EtcdProcess etcd_;
  std::unique_ptr<cluster::EtcdClient> etcd_client_;
  std::vector<std::string> heaps_;
  std::vector<std::unique_ptr<testing::ServerProcess>> servers_;
};

TEST_P(FailoverTest, NoAcknowledgedWriteIsLostAndNoReadIsStaleThroughKillsAndAStop) {
  std::string out;
  ASSERT_EQ(testing::RunCommand(absl::StrCat(testing::BinDir(), "/ardma --server ", Where(),
                                             " cluster create --replicas ",
                                             GetParam().replicas),
                                &out),
            0)
      << out;
  History history;
  std::atomic<bool> done{false};
  std::atomic<int> answered{0};  // operations answered: the load between faults is counted
  // Waits until the clients have had `n` more operations answered.
  auto load = [&](int n) {
    const int from = answered.load();
    ASSERT_TRUE(testing::WaitUntil([&] { return answered.load() >= from + n; }));
  };
  std::atomic<int> busy_key{0};  // the key the clients hit most; the nemesis kills its owner
  std::vector<std::thread> clients;
  absl::Cleanup stop_clients = [&] {  // (also when an assertion ends the test early)
    done = true;
    for (std::thread& t : clients) {
      if (t.joinable()) t.join();
    }
  };
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = cluster::Cluster::Connect(Where());
      ASSERT_TRUE(routed.ok()) << routed.status();
      dht::DhtClient dht(routed->get(), Mode::kActive);
      std::mt19937 random(c);
      for (int n = 0; !done.load(); ++n) {
        const int key = random() % 4 == 0 ? busy_key.load() : static_cast<int>(random() % kKeys);
        Op op{.put = random() % 2 == 0, .key = key, .start = absl::Now()};
        if (op.put) {
          op.value = absl::StrCat("c", c, "-", n);
          op.ok = dht.Put(kTable, KeyName(key), op.value).ok();
        } else {
          absl::StatusOr<std::string> got = dht.Get(kTable, KeyName(key));
          op.ok = got.ok() || absl::IsNotFound(got.status());
          if (got.ok()) op.value = *got;
        }
        op.end = absl::Now();
        const bool failed = !op.ok;
        history.Add(std::move(op));
        if (!failed) answered++;
        // (A failed call is tried again at once: the router already waited out redirects.)
      }
    });
  }
  ASSERT_NO_FATAL_FAILURE(load(2000));  // before the first fault
  // Three times: SIGKILL the busy key's primary; once etcd dropped it, restart it (same memory
  // file, same id): it rejoins as a replica and is filled.
  for (int round = 0; round < 3; ++round) {
    busy_key = round * 7 + 1;
    ASSERT_TRUE(testing::WaitUntil([&] { return NotRedundant().empty(); })) << NotRedundant();
    auto [victim, id] = OwnerOf(KeyName(busy_key));
    ASSERT_GE(victim, 0) << "the owner of the busy key is not one of the servers";
    std::cout << absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone())
              << " SIGKILL " << id << "\n";
    servers_[victim]->Kill(SIGKILL);
    ASSERT_TRUE(testing::WaitUntil([&, id = id] { return !Registered(id); }));
    std::cout << absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone())
              << " restart " << id << "\n";
    servers_[victim] = Start(victim);
    ASSERT_FALSE(servers_[victim]->address().empty());
    ASSERT_TRUE(testing::WaitUntil([&] { return RegisteredAt(servers_[victim]->address()); }));
    ASSERT_NO_FATAL_FAILURE(load(1000));  // between faults
  }
  // SIGSTOP the busy key's primary past its lease; SIGCONT: a write sent to it directly is
  // refused (it is fenced), and it ends (fail-stop); restarted, it rejoins.
  busy_key = 500;
  ASSERT_TRUE(testing::WaitUntil([&] { return NotRedundant().empty(); })) << NotRedundant();
  auto [stopped, stopped_id] = OwnerOf(KeyName(busy_key));
  ASSERT_GE(stopped, 0);
  const std::string stopped_address = servers_[stopped]->address();
  ASSERT_TRUE(servers_[stopped]->Freeze());
  ASSERT_TRUE(testing::WaitUntil([&, id = stopped_id] { return !Registered(id); }));
  ASSERT_NO_FATAL_FAILURE(load(500));  // the clients go on (its replica primary, or without it)
  servers_[stopped]->Signal(SIGCONT);
  EXPECT_NE(testing::RunCommand(absl::StrCat(testing::BinDir(), "/ardma --server ",
                                             stopped_address, " dht put ", kTable, " ",
                                             KeyName(busy_key), " from-a-stale-primary"),
                                &out),
            0)
      << "a stale primary acknowledged a write: " << out;
  std::optional<int> exited;
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return (exited = servers_[stopped]->Exited()).has_value(); }));
  servers_[stopped] = Start(stopped);
  ASSERT_FALSE(servers_[stopped]->address().empty());
  ASSERT_NO_FATAL_FAILURE(load(1000));  // after the last fault
  std::move(stop_clients).Invoke();

  // The final reads, once every key answers again.
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = cluster::Cluster::Connect(Where());
  ASSERT_TRUE(routed.ok()) << routed.status();
  dht::DhtClient dht(routed->get(), Mode::kActive);
  std::map<int, std::string> final_values;
  for (int key = 0; key < kKeys; ++key) {
    absl::StatusOr<std::string> got;
    EXPECT_TRUE(testing::WaitUntil([&] {
      got = dht.Get(kTable, KeyName(key));
      return got.ok() || absl::IsNotFound(got.status());
    })) << KeyName(key) << ": " << got.status();
    if (got.ok()) final_values[key] = *got;
  }
  std::vector<Op> ops = history.Take();
  const size_t acked = std::count_if(ops.begin(), ops.end(), [](const Op& op) {
    return op.put && op.ok;
  });
  const size_t reads = std::count_if(ops.begin(), ops.end(), [](const Op& op) {
    return !op.put && op.ok;
  });
  EXPECT_GT(acked, 1000u) << "too few acknowledged writes for the check to mean much";
  std::vector<std::string> violations = Check(ops, final_values);
  for (size_t i = 0; i < std::min<size_t>(violations.size(), 20); ++i) {
    ADD_FAILURE() << violations[i];
  }
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations in " << ops.size()
                                  << " operations (" << acked << " acknowledged puts, " << reads
                                  << " reads)";
  std::cout << ops.size() << " operations: " << acked << " acknowledged puts, " << reads
            << " answered reads, " << final_values.size() << " keys at the end\n";
}

INSTANTIATE_TEST_SUITE_P(Restarts, FailoverTest,
                         ::testing::Values(Faults{.from_memory_files = false},
                                           Faults{.from_memory_files = true},
                                           Faults{.from_memory_files = true, .replicas = 2}),
                         [](const ::testing::TestParamInfo<Faults>& info) {
                           return absl::StrCat(
                               info.param.from_memory_files ? "FromMemoryFiles" : "AsNewServers",
                               info.param.replicas == 1 ? "" : "TwoReplicas");
                         });

}  // namespace
}  // namespace ardma
