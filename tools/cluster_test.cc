// ardmad --cluster: a server joins a cluster kept in a real etcd, keeps its id across restarts
// with the same memory file, leaves when it dies, and refuses bad cluster settings clearly.
#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/testing/etcd_process.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

  // A clean stop leaves at once.
  again.Kill(SIGTERM);
  EXPECT_TRUE(Members().empty());
  std::filesystem::remove(heap);
  std::filesystem::remove(copy);
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
  // Nothing listens there: the server does not start half-joined.
  EXPECT_EQ(RunCommand("timeout 20 " + ardmad + "--cluster etcd://127.0.0.1:1/c1", &out), 1);
  EXPECT_THAT(out, HasSubstr("etcd at 127.0.0.1:1 is unreachable"));
}

}  // namespace
}  // namespace ardma
