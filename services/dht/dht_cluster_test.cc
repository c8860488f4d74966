// The DHT over a cluster of three servers (docs/cluster.md): each key lives on the server its
// slot's owner is, and comes back from there, in both modes.
#include "absl/strings/str_cat.h"
#include "core/cluster/router.h"
#include "core/testing/cluster_fixture.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"

namespace ardma::dht {
namespace {

class DhtClusterTest : public testing::ClusterSuite<::testing::TestWithParam<Mode>> {};

TEST_P(DhtClusterTest, KeysLandOnTheServersTheMapNamesAndComeBack) {
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = fixture_->ConnectOverTestTransport();
  ASSERT_TRUE(routed.ok()) << routed.status();
  DhtClient dht(routed->get(), GetParam());
  std::vector<std::unique_ptr<Client>> direct = fixture_->ClientOfEachServer();
  std::vector<std::unique_ptr<DhtClient>> alone;  // each server on its own, to see where things are
  for (std::unique_ptr<Client>& client : direct) {
    ASSERT_NE(client, nullptr);
    alone.push_back(std::make_unique<DhtClient>(client.get(), GetParam()));
  }
  std::string table = absl::StrCat("t_", ModeName(GetParam()));
  constexpr int kKeys = 600;
  for (int i = 0; i < kKeys; ++i) {
    absl::StatusOr<bool> fresh = dht.Put(table, absl::StrCat("key", i), absl::StrCat("value", i));
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_TRUE(*fresh);
  }
  absl::StatusOr<uint64_t> size = dht.Size(table);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, static_cast<uint64_t>(kKeys));  // the servers' counts added up
  std::vector<int> per_server(3);
  std::shared_ptr<const cluster::SlotMap> map = (*routed)->map();
  for (int i = 0; i < kKeys; ++i) {
    std::string key = absl::StrCat("key", i);
    EXPECT_EQ(*dht.Get(table, key), absl::StrCat("value", i));
    int owner = testing::ClusterFixture::IndexOf(map->Owner(cluster::SlotOf(table, key)));
    ++per_server[owner];
    for (int s = 0; s < 3; ++s) {
      absl::StatusOr<bool> there = alone[s]->Contains(table, key);
      EXPECT_EQ(there.ok() && *there, s == owner) << key << " on server " << s;
    }
  }
  for (int n : per_server) EXPECT_GT(n, kKeys / 6) << "keys spread over the servers";
  for (int i = 0; i < kKeys; i += 2) EXPECT_TRUE(*dht.Remove(table, absl::StrCat("key", i)));
  EXPECT_EQ(*dht.Size(table), static_cast<uint64_t>(kKeys / 2));
  EXPECT_EQ(dht.Get(table, "key0").status().code(), absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Modes, DhtClusterTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

}  // namespace
}  // namespace ardma::dht
