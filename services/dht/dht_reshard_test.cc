// Resharding under load (docs/cluster.md, "Moving slots"): eight clients put, get and remove over
// 100,000 keys while `ardma cluster add` moves half the slots of two servers to a third. Every
// acknowledged write is read back afterwards, no key is held by two servers, and no client sees
// an error. The clients' maps are deliberately stale (never re-read on a timer): they learn of
// each move only from the fence of the server the slots left — in RDMA mode from its memory.
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/cluster/admin.h"
#include "core/cluster/router.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_mover.h"

namespace ardma::dht {
namespace {

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
  std::vector<std::unique_ptr<cluster::Cluster>> clients;
  for (int c = 0; c < kClients; ++c) {
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed =
        fixture.ConnectOverTestTransport(/*refresh_interval=*/absl::ZeroDuration());
    ASSERT_TRUE(routed.ok()) << routed.status();
    clients.push_back(*std::move(routed));
  }
  std::vector<Worker> workers(kClients);
  {  // Every key there at the start.
    std::vector<std::thread> loaders;
    for (int c = 0; c < kClients; ++c) {
      loaders.emplace_back([&, c] {
        DhtClient dht(clients[c].get(), Mode::kActive);
        for (int i = c; i < kKeys; i += kClients) {
          std::string value = absl::StrCat("first", i);
          ASSERT_TRUE(dht.Put("t", Key(i), value).ok());
          workers[c].model[i] = value;
        }
      });
    }
    for (std::thread& t : loaders) t.join();
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
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(workers[c].errors, 0) << "client " << c << ": " << workers[c].first_error;
  }

  // The map: s2 has a third of the slots, at a later epoch.
  cluster::StoredMap stored = *cluster::ReadMap(fixture.etcd(), "c1");
  EXPECT_GT(stored.map.epoch(), 1u);
  EXPECT_EQ(stored.map.SlotCount("s2"), 5461u);
  // Each key on exactly one server, the one the map names, with the last acknowledged value.
  std::vector<std::unique_ptr<Client>> direct = fixture.ClientOfEachServer();
  std::map<std::string, int> holders;
  for (int s = 0; s < 3; ++s) {
    absl::StatusOr<std::vector<std::string>> keys = KeysOf(*direct[s], "t");
    ASSERT_TRUE(keys.ok()) << keys.status();
    for (const std::string& key : *keys) {
      ++holders[key];
      EXPECT_EQ(stored.map.Owner(slots::SlotOf("t", key)), absl::StrCat("s", s)) << key;
    }
  }
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> fresh = fixture.ConnectOverTestTransport();
  ASSERT_TRUE(fresh.ok());
  DhtClient check(fresh->get(), GetParam());
  size_t expected = 0;
  for (int c = 0; c < kClients; ++c) {
    expected += workers[c].model.size();
    for (const auto& [i, value] : workers[c].model) {
      ASSERT_EQ(holders[Key(i)], 1) << Key(i);
      absl::StatusOr<std::string> got = check.Get("t", Key(i));
      ASSERT_TRUE(got.ok()) << Key(i) << ": " << got.status();
      ASSERT_EQ(*got, value) << Key(i);
    }
  }
  EXPECT_EQ(holders.size(), expected) << "keys nobody acknowledged, or removed ones, are there";
  EXPECT_EQ(*check.Size("t"), expected);
}

INSTANTIATE_TEST_SUITE_P(Modes, DhtReshardTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

}  // namespace
}  // namespace ardma::dht
