// The DHT on a cluster whose slots have replicas (docs/cluster.md, "Replication"): three servers,
// each owner's slots replicated to the next. A write is acknowledged only once its owner's replica
// has applied it, so a replica holds every acknowledged write, also after its primary died; a
// write that did not reach the replica is not acknowledged; one-sided writes are refused.
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/client/invoke.h"
#include "core/cluster/router.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/wait_until.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"
#include "services/replica_filler.h"

namespace ardma::dht {
namespace {

using testing::ClusterFixture;

ServerOptions WithTheDht() {
  ServerOptions options = ardma::testing::TestServerOptions();
  options.memory_size = 32u << 20;
  // As ardmad: the built-in services, which a replica runs its primary's writes with.
  options.built_in_services = {&active_libraries::dht()};
  return options;
}

// A fresh cluster per test (some kill their members), and a Cluster client of it.
class DhtReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<ClusterFixture>(
        3, WithTheDht(), /*owners=*/-1, /*replicas=*/1, /*peer_transport=*/"",
        [](const ClusterFixture::Member& m) -> std::shared_ptr<void> {
          return std::make_shared<ReplicaFiller>(ReplicaFillerOptions{
              .self = m.id, .server = m.server, .peers = m.peers, .replication = m.replication});
        });
    ASSERT_TRUE(cluster_->ok()) << cluster_->why();
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed =
        cluster_->ConnectOverTestTransport();
    ASSERT_TRUE(routed.ok()) << routed.status();
    routed_ = *std::move(routed);
    map_ = routed_->map();
  }
  std::unique_ptr<ClusterFixture> cluster_;
  std::unique_ptr<cluster::Cluster> routed_;
  std::shared_ptr<const cluster::SlotMap> map_;
};

// `key` of `table` as server `client` holds it, whatever its fence says (nullopt: absent).
absl::StatusOr<std::optional<std::string>> HeldBy(Client& client, std::string_view table,
                                                  std::string_view key) {
  std::string args;
  EncodeTarget(Target{.name = table, .unfenced = true}, &args);
  args += EncodeKeyArgs(key);
  absl::StatusOr<std::string> got =
      Invoke(client, Mode::kActive, active_libraries::dht(), "dht.get", args);
  if (absl::IsNotFound(got.status())) return std::nullopt;  // (no such table there)
  if (!got.ok()) return got.status();
  ARDMA_ASSIGN_OR_RETURN(Reply reply, DecodeReply(*got, ReplyKind::kFlagAndValue));
  if (!reply.flag) return std::nullopt;
  return reply.value;
}

// The index of the replica of `key`'s owner, and of the owner.
std::pair<int, int> OwnerAndReplica(const cluster::SlotMap& map, std::string_view table,
                                    std::string_view key) {
  const std::string& owner = map.Owner(cluster::SlotOf(table, key));
  return {ClusterFixture::IndexOf(owner), ClusterFixture::IndexOf(map.ReplicasOf(owner).at(0))};
}

uint64_t Stat(Client& client, std::string_view name) {
  absl::StatusOr<uint64_t> value = ardma::testing::StatValue(client, name);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.value_or(0);
}

TEST_F(DhtReplicationTest, EveryAcknowledgedWriteIsOnTheOwnersReplicaInTheOwnersOrder) {
  DhtClient dht(routed_.get(), Mode::kActive);
  const std::string table = "replicated";
  constexpr int kKeys = 300;
  // Every key written, half written again, a quarter removed: what each key holds last is what
  // the replica must hold, which it only does if it applied them in the owner's order.
  std::map<std::string, std::optional<std::string>> last;
  int writes = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = absl::StrCat("key", i);
      if (round == 1 && i % 2 == 0) {
        ASSERT_TRUE(dht.Put(table, key, absl::StrCat("second", i)).ok());
        last[key] = absl::StrCat("second", i);
      } else if (round == 2 && i % 4 == 0) {
        absl::StatusOr<bool> removed = dht.Remove(table, key);
        ASSERT_TRUE(removed.ok()) << removed.status();
        last[key] = std::nullopt;
      } else if (round == 0) {
        absl::StatusOr<bool> put = dht.Put(table, key, absl::StrCat("first", i));
        ASSERT_TRUE(put.ok()) << put.status();
        last[key] = absl::StrCat("first", i);
      } else {
        continue;
      }
      ++writes;
    }
  }
  std::vector<std::unique_ptr<Client>> direct = cluster_->ClientOfEachServer();
    for (const auto& [key, value] : last) {
    auto [owner, replica] = OwnerAndReplica(*map_, table, key);
    ASSERT_NE(owner, replica);
    absl::StatusOr<std::optional<std::string>> on_replica = HeldBy(*direct[replica], table, key);
    ASSERT_TRUE(on_replica.ok()) << on_replica.status();
    EXPECT_EQ(*on_replica, value) << key << " on replica s" << replica;
    EXPECT_EQ(*HeldBy(*direct[owner], table, key), value) << key << " on owner s" << owner;
    const int other = 3 - owner - replica;
    EXPECT_EQ(*HeldBy(*direct[other], table, key), std::nullopt) << "only owner and replica";
    absl::StatusOr<std::string> read = dht.Get(table, key);
    EXPECT_EQ(read.ok() ? std::optional<std::string>(*read) : std::nullopt, value);
  }
  // Each write was forwarded once and applied once; no server refused one.
  uint64_t forwarded = 0, applied = 0;
  for (std::unique_ptr<Client>& client : direct) {
    forwarded += Stat(*client, "replication.writes");
    applied += Stat(*client, "replica.applied");
    EXPECT_EQ(Stat(*client, "replication.failures"), 0u);
    EXPECT_EQ(Stat(*client, "replica.refused"), 0u);
  }
  EXPECT_EQ(forwarded, static_cast<uint64_t>(writes));
  EXPECT_EQ(applied, static_cast<uint64_t>(writes));
}

// Every member is a primary whose writes wait for the next one's apply: writers on all of them at
// once must not leave each member's workers waiting for a replica whose apply waits for a worker
// (a ring of members waiting on each other until the deadline).
TEST_F(DhtReplicationTest, ConcurrentWritersOnEveryMemberNeverWaitOnEachOtherInARing) {
  constexpr int kThreads = 12;
  std::atomic<int> failed{0};
  std::string first_error;
  absl::Mutex mu;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed =
          cluster_->ConnectOverTestTransport();
      if (!routed.ok()) {
        failed++;
        return;
      }
      DhtClient dht(routed->get(), Mode::kActive);
      for (int i = 0; i < 150; ++i) {
        absl::StatusOr<bool> put =
            dht.Put("ring", absl::StrCat("t", t, "-", i % 40), absl::StrCat(i));
        if (!put.ok()) {
          if (failed++ == 0) {
            absl::MutexLock lock(&mu);
            first_error = put.status().ToString();
          }
          return;
        }
      }
    });
  }
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(failed.load(), 0) << first_error;
}

TEST_F(DhtReplicationTest, WhenAPrimaryDiesItsReplicaHoldsEveryAcknowledgedWrite) {
  DhtClient dht(routed_.get(), Mode::kActive);
    std::vector<std::string> acknowledged;  // keys of s0's slots
  for (int i = 0; acknowledged.size() < 50; ++i) {
    const std::string key = absl::StrCat("k", i);
    if (OwnerAndReplica(*map_, "t", key).first != 0) continue;
    ASSERT_TRUE(dht.Put("t", key, absl::StrCat("v", i)).ok());
    acknowledged.push_back(key);
  }
  cluster_->Stop(0);
  std::vector<std::unique_ptr<Client>> direct = cluster_->ClientOfEachServer();
  const int replica = OwnerAndReplica(*map_, "t", acknowledged[0]).second;
  for (const std::string& key : acknowledged) {
    absl::StatusOr<std::optional<std::string>> held = HeldBy(*direct[replica], "t", key);
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_EQ(*held, absl::StrCat("v", key.substr(1))) << key;
  }
}

TEST_F(DhtReplicationTest, AWriteThatMissedAReplicaIsNotAcknowledgedNorAreTheSlotsNextOnes) {
  CallOptions quick;
  quick.timeout = absl::Seconds(5);
  DhtClient dht(routed_.get(), Mode::kActive, quick);
    // A key of s0's slots; s0's replica is s1.
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    if (OwnerAndReplica(*map_, "t", absl::StrCat("k", i)).first == 0) key = absl::StrCat("k", i);
  }
  const int replica = OwnerAndReplica(*map_, "t", key).second;
  ASSERT_TRUE(dht.Put("t", key, "one").ok());
  cluster_->Stop(replica);
  absl::StatusOr<bool> missed = dht.Put("t", key, "two");
  EXPECT_EQ(missed.status().code(), absl::StatusCode::kUnavailable) << missed.status();
  EXPECT_NE(missed.status().message().find(absl::StrCat("replica s", replica)), std::string::npos)
      << missed.status();
  // The replica comes back having missed that write (and, here, without its memory): it refuses
  // the slot's next writes rather than hold a copy with a hole in it.
  // (Until the primary sees the replica's new address, it cannot reach it at all.)
  ASSERT_TRUE(cluster_->Restart(replica).ok());
  absl::StatusOr<bool> after;
  EXPECT_TRUE(ardma::testing::WaitUntil(
      [&] {
        after = dht.Put("t", key, "three");
        return !after.ok() && after.status().message().find("missed writes") != std::string::npos;
      },
      absl::Seconds(15), absl::Milliseconds(50)))
      << after.status();
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable) << after.status();
}

TEST_F(DhtReplicationTest, AStaleReadIsAnsweredByTheOwnersReplica) {
  DhtClient dht(routed_.get(), Mode::kActive);
  CallOptions stale;
  stale.stale_read = true;
  stale.timeout = absl::Seconds(5);
  DhtClient from_replicas(routed_.get(), Mode::kActive, stale);
    std::vector<std::string> keys;  // of s0's slots
  for (int i = 0; keys.size() < 20; ++i) {
    const std::string key = absl::StrCat("k", i);
    if (OwnerAndReplica(*map_, "t", key).first != 0) continue;
    ASSERT_TRUE(dht.Put("t", key, absl::StrCat("v", i)).ok());
    keys.push_back(key);
  }
  cluster_->Stop(0);  // only the replica can answer now
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> read = from_replicas.Get("t", key);
    ASSERT_TRUE(read.ok()) << key << ": " << read.status();
    EXPECT_EQ(*read, absl::StrCat("v", key.substr(1)));
    EXPECT_EQ(from_replicas.Contains("t", key).value_or(false), true);
  }
  EXPECT_EQ(from_replicas.Get("t", "absent-key-of-any-slot").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(dht.Get("t", keys[0]).ok()) << "a read that is not stale goes to the owner";
  DhtClient rdma(routed_.get(), Mode::kRdma, stale);
  EXPECT_EQ(rdma.Get("t", keys[0]).status().code(), absl::StatusCode::kInvalidArgument);
  // A server that is not a key's replica does not answer for it, stale or not.
  std::vector<std::unique_ptr<Client>> direct = cluster_->ClientOfEachServer();
  const int other = 3 - 0 - OwnerAndReplica(*map_, "t", keys[0]).second;
  DhtClient elsewhere(direct[other].get(), Mode::kActive, stale);
  absl::StatusOr<std::string> refused = elsewhere.Get("t", keys[0]);
  EXPECT_FALSE(refused.ok());
}

TEST_F(DhtReplicationTest, OneSidedWritesToAReplicatedSlotAreRefusedReadsAreNot) {
  DhtClient active(routed_.get(), Mode::kActive);
  DhtClient rdma(routed_.get(), Mode::kRdma);
  absl::StatusOr<bool> written = active.Put("t", "written", "actively");
  ASSERT_TRUE(written.ok()) << written.status();
  absl::StatusOr<bool> put = rdma.Put("t", "k", "v");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition) << put.status();
  EXPECT_NE(put.status().message().find("replicated"), std::string::npos) << put.status();
  EXPECT_EQ(rdma.Remove("t", "written").status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::string> read = rdma.Get("t", "written");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "actively");
  EXPECT_EQ(rdma.Get("t", "k").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ardma::dht
