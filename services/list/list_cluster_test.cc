// Lists over a cluster of three servers (docs/cluster.md): each list lives whole on the server
// that owns its name's slot, in both modes.
#include "absl/strings/str_cat.h"
#include "core/cluster/router.h"
#include "core/testing/cluster_fixture.h"
#include "gtest/gtest.h"
#include "services/list/list_client.h"

namespace ardma::list {
namespace {

class ListClusterTest : public testing::ClusterSuite<::testing::TestWithParam<Mode>> {};

TEST_P(ListClusterTest, EachListLivesWholeOnTheServerTheMapNames) {
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = fixture_->ConnectOverTestTransport();
  ASSERT_TRUE(routed.ok()) << routed.status();
  ListClient lists(routed->get(), GetParam());
  std::vector<std::unique_ptr<Client>> direct = fixture_->ClientOfEachServer();
  std::vector<std::unique_ptr<ListClient>> alone;  // each server on its own, to see where things are
  for (std::unique_ptr<Client>& client : direct) {
    ASSERT_NE(client, nullptr);
    alone.push_back(std::make_unique<ListClient>(client.get(), GetParam()));
  }
  std::vector<int> per_server(3);
  std::shared_ptr<const cluster::SlotMap> map = (*routed)->map();
  for (int l = 0; l < 24; ++l) {
    std::string name = absl::StrCat("l_", ModeName(GetParam()), l);
    for (int64_t v = 0; v < 5; ++v) ASSERT_TRUE(lists.Append(name, ListValue(v)).ok());
    EXPECT_EQ(*lists.Size(name), 5u);
    EXPECT_EQ(std::get<int64_t>(*lists.Get(name, 3)), 3);
    int owner = testing::ClusterFixture::IndexOf(map->Owner(cluster::SlotOf(kListSpace, name)));
    ++per_server[owner];
    for (int s = 0; s < 3; ++s) {
      absl::StatusOr<uint64_t> there = alone[s]->Size(name);
      EXPECT_EQ(there.ok() ? *there : 0, s == owner ? 5u : 0u) << name << " on server " << s;
    }
    EXPECT_EQ(std::get<int64_t>(*lists.Remove(name, 0)), 0);
    EXPECT_EQ(*lists.Size(name), 4u);
  }
  for (int n : per_server) EXPECT_GT(n, 0) << "the lists spread over the servers";
}

INSTANTIATE_TEST_SUITE_P(Modes, ListClusterTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

}  // namespace
}  // namespace ardma::list
