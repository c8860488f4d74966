#include "core/cluster/router.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "core/testing/etcd_process.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cluster {
namespace {

using ::testing::HasSubstr;

// Three servers registered as members s0, s1, s2 of cluster c1, the slots even over them.
class ClusterRouterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.ok()) << cluster_.why(); }
  std::string Address() const { return cluster_.address(); }
  std::string ServerAddress(int i) { return cluster_.server(i).address(); }

  testing::ClusterFixture cluster_{3, 16u << 20};
};

TEST_F(ClusterRouterTest, EveryKeyGoesToTheServerTheMapNames) {
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Connect(Address());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<int> per_server(3);
  for (int i = 0; i < 3000; ++i) {
    std::string key = absl::StrCat("key", i);
    uint32_t slot = SlotOf("table", key);
    absl::StatusOr<Client*> client = (*cluster)->ForKey("table", key);
    ASSERT_TRUE(client.ok()) << client.status();
    int owner = (*cluster)->map()->Owner(slot).back() - '0';
    EXPECT_EQ((*client)->address(), ServerAddress(owner)) << key;
    ++per_server[owner];
  }
  for (int n : per_server) EXPECT_GT(n, 800) << "the keys spread over the three";
  // One Client per server, reused.
  EXPECT_EQ(*(*cluster)->ForSlot(0), *(*cluster)->ForSlot(1));
  EXPECT_TRUE((*(*cluster)->ForSlot(0))->Ping().ok());
  EXPECT_EQ((*cluster)->ForSlot(kSlots).status().code(), absl::StatusCode::kInvalidArgument);
}

// Without a follower (refresh_interval 0): the map is read again only by Refresh.
TEST_F(ClusterRouterTest, ARefreshFollowsAMovedRangeAndTheCacheOutlivesEtcd) {
  Cluster::Options no_follower;
  no_follower.refresh_interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Connect(Address(), no_follower);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ((*(*cluster)->ForSlot(0))->address(), ServerAddress(0));
  SlotMap moved = SlotMap::Even({"s0", "s1", "s2"}).WithRange(0, 99, "s2");
  ASSERT_TRUE(cluster_.etcd().Put(MapKey("c1"), moved.ToJson()).ok());
  EXPECT_EQ((*(*cluster)->ForSlot(0))->address(), ServerAddress(0));  // cached until...
  ASSERT_TRUE((*cluster)->Refresh().ok());
  EXPECT_EQ((*cluster)->map()->epoch(), 2u);
  EXPECT_EQ((*(*cluster)->ForSlot(0))->address(), ServerAddress(2));
  EXPECT_EQ((*(*cluster)->ForSlot(100))->address(), ServerAddress(0));

  cluster_.etcd_process().Kill(SIGKILL);  // etcd away: routing goes on from the cache
  EXPECT_EQ((*cluster)->Refresh().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<Client*> client = (*cluster)->ForSlot(kSlots - 1);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->address(), ServerAddress(2));
  EXPECT_TRUE((*client)->Ping().ok());
  EXPECT_EQ((*cluster)->map()->epoch(), 2u);
}

// The follower takes a new map as etcd reports it (were it polled, an hour would pass first), and
// a Cluster closes at once while it waits.
TEST_F(ClusterRouterTest, AClientFollowsTheMapAsEtcdReportsEachChange) {
  Cluster::Options options;
  options.refresh_interval = absl::Hours(1);
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Connect(Address(), options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (uint64_t epoch = 2; epoch <= 3; ++epoch) {
    SlotMap moved = SlotMap::Even({"s0", "s1", "s2"}).WithRange(0, epoch, "s2");
    while (moved.epoch() < epoch) moved = moved.WithRange(0, epoch, "s2");
    ASSERT_TRUE(cluster_.etcd().Put(MapKey("c1"), moved.ToJson()).ok());
    ASSERT_TRUE(testing::WaitUntil([&] { return (*cluster)->map()->epoch() == epoch; }))
        << "the map of epoch " << epoch << " was not taken";
    EXPECT_EQ((*(*cluster)->ForSlot(0))->address(), ServerAddress(2));
  }
  cluster->reset();  // the destructor wakes the follower from its watch
}

TEST_F(ClusterRouterTest, ASlotWhoseServerIsGoneIsUnavailableNamingIt) {
  ASSERT_TRUE(cluster_.etcd().Delete(MembersPrefix("c1") + "s1").ok());  // its lease ran out
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Connect(Address());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  uint32_t s1_slot = kSlots / 2;
  absl::StatusOr<Client*> gone = (*cluster)->ForSlot(s1_slot);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gone.status().message(), HasSubstr("server s1, which is not a live member"));
  EXPECT_TRUE((*cluster)->ForSlot(0).ok());  // the others' slots keep working
  // Registered, but nothing listens there.
  cluster_.Register("s1", "127.0.0.1:1");
  ASSERT_TRUE((*cluster)->Refresh().ok());
  gone = (*cluster)->ForSlot(s1_slot);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable) << gone.status();
  EXPECT_THAT(gone.status().message(), HasSubstr("server s1 (127.0.0.1:1)"));
}

TEST(ClusterRouterErrorsTest, NoEtcdNoMapOrABadMapAreClearErrors) {
  EXPECT_EQ(Cluster::Connect("etcd://127.0.0.1:1/c1").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Cluster::Connect("127.0.0.1:15712").status().code(),
            absl::StatusCode::kInvalidArgument);
  testing::EtcdProcess etcd;
  ASSERT_FALSE(etcd.endpoint().empty());
  std::string address = absl::StrCat("etcd://", etcd.endpoint(), "/empty");
  absl::StatusOr<std::unique_ptr<Cluster>> none = Cluster::Connect(address);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("has no slot map yet"));
  std::unique_ptr<EtcdClient> etcd_client = *EtcdClient::Connect(etcd.endpoint());
  ASSERT_TRUE(etcd_client
                  ->Put(MapKey("empty"), R"({"epoch": 1, "ranges": [
                      {"first": 0, "last": 100, "server": "a"}]})")
                  .ok());
  absl::StatusOr<std::unique_ptr<Cluster>> bad = Cluster::Connect(address);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("slot 101 has no owner"));
}

}  // namespace
}  // namespace ardma::cluster
