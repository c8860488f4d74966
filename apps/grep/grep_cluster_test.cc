// ardma-grep over one file system across a cluster of three (docs/dfs.md): each file is searched
// on the member that holds its bytes, all members in one parallel wave; a member that is down
// makes its files unreadable, as GNU grep reports unreadable files, and the rest is searched.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/run_command.h"
#include "core/testing/test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

namespace ardma {
namespace {

using ::testing::ElementsAreArray;

class GrepClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fixture_.ok()) << fixture_.why();
    absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = fixture_.ConnectOverTestTransport();
    ASSERT_TRUE(routed.ok()) << routed.status();
    routed_ = *std::move(routed);
    dfs::DfsClient fs(routed_.get(), Mode::kActive);
    // 60 files in 6 directories; each has two lines with "needle" and one without.
    ASSERT_TRUE(fs.Mkdir("/t").ok());
    for (int d = 0; d < 6; ++d) ASSERT_TRUE(fs.Mkdir(absl::StrCat("/t/d", d)).ok());
    for (int i = 0; i < 60; ++i) {
      std::string path = absl::StrCat("/t/d", i % 6, "/f", i);
      ASSERT_TRUE(fs.WriteFile(path, absl::StrCat("needle ", i, "\nhay\nneedle again\n")).ok());
      absl::StatusOr<dfs::Stat> st = fs.Lookup(path);
      ASSERT_TRUE(st.ok()) << st.status();
      holder_[path] = routed_->map()->Owner(dfs::DataSlot("default", st->ino));
    }
    namespace_member_ = routed_->map()->Owner(dfs::NamespaceSlot("default"));
  }

  // execute.inline + execute.pooled of each member.
  std::vector<uint64_t> Executes() {
    std::vector<uint64_t> out;
    for (std::unique_ptr<Client>& c : fixture_.ClientOfEachServer()) {
      out.push_back(*testing::StatValue(*c, "execute.inline") +
                    *testing::StatValue(*c, "execute.pooled"));
    }
    return out;
  }

  std::string Grep(const std::string& args) {
    return absl::StrCat(testing::BinDir(), "/ardma-grep --server=", fixture_.address(), " ",
                        args);
  }

  // Every match of "needle" in the files `holder` (by member id) says, in GNU's order.
  std::vector<std::string> Expected(const std::string& except_member = "") {
    std::vector<std::string> lines;
    for (const auto& [path, member] : holder_) {  // (std::map: sorted by path, as grep -r)
      if (member == except_member) continue;
      std::string i = path.substr(path.rfind('f') + 1);
      lines.push_back(absl::StrCat("dfs:", path, ":1:needle ", i));
      lines.push_back(absl::StrCat("dfs:", path, ":3:needle again"));
    }
    return lines;
  }

  testing::ClusterFixture fixture_{3, 64u << 20};
  std::unique_ptr<cluster::Cluster> routed_;
  std::map<std::string, std::string> holder_;  // path -> the member with its bytes
  std::string namespace_member_;
};

TEST_F(GrepClusterTest, EachMemberSearchesItsFilesInOneWaveAndTheOutputIsInPathOrder) {
  std::map<std::string, int> files_on;
  for (const auto& [path, member] : holder_) ++files_on[member];
  ASSERT_EQ(files_on.size(), 3u) << "the files should be on every member";
  std::vector<uint64_t> before = Executes();
  std::string out, err;
  ASSERT_EQ(testing::RunCommandSplit(Grep("-rn needle dfs:/t"), &out, &err), 0) << err;
  std::vector<uint64_t> after = Executes();
  EXPECT_THAT(absl::StrSplit(out, '\n', absl::SkipEmpty()), ElementsAreArray(Expected()));
  EXPECT_EQ(err, "");
  // The namespace's member: the operand's stat, one page of find and its own files' scan; every
  // other member: one scan request.
  for (int i = 0; i < 3; ++i) {
    std::string id = absl::StrCat("s", i);
    EXPECT_EQ(after[i] - before[i], id == namespace_member_ ? 3u : 1u) << id;
  }
}

TEST_F(GrepClusterTest, AMemberThatIsDownMakesItsFilesUnreadableAndTheRestIsSearched) {
  std::string down;
  for (int i = 0; i < 3 && down.empty(); ++i) {
    if (absl::StrCat("s", i) != namespace_member_) down = absl::StrCat("s", i);
  }
  fixture_.server(testing::ClusterFixture::IndexOf(down)).server().Stop();
  std::string out, err;
  EXPECT_EQ(testing::RunCommandSplit(Grep("-rn needle dfs:/t"), &out, &err), 2);
  EXPECT_THAT(absl::StrSplit(out, '\n', absl::SkipEmpty()), ElementsAreArray(Expected(down)));
  std::vector<std::string> unreadable;
  for (const auto& [path, member] : holder_) {
    if (member == down) unreadable.push_back("ardma-grep: dfs:" + path + ": ");
  }
  std::vector<std::string> errors = absl::StrSplit(err, '\n', absl::SkipEmpty());
  ASSERT_EQ(errors.size(), unreadable.size()) << err;
  for (size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].rfind(unreadable[i], 0), 0u) << errors[i];
  }
  // -s keeps quiet about them; the exit status still says something was unreadable.
  EXPECT_EQ(testing::RunCommandSplit(Grep("-rns needle dfs:/t"), &out, &err), 2);
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace ardma
