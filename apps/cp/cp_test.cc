// ardma-cp: a real tree up, across (on the server, one request) and down again, compared with diff
// and by listing; cp's semantics for targets, -n, -p, -v and errors.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "apps/cp/cp_cli.h"
#include "core/server/server.h"
#include "core/testing/run_command.h"
#include "core/testing/server_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

namespace ardma {
namespace {

using testing::BinDir;
using ::testing::HasSubstr;
using testing::RunCommand;
namespace fsys = std::filesystem;

class CpTest : public testing::ServerFixture<::testing::Test> {
 protected:
  void SetUp() override {
    ServerOptions options = testing::TestServerOptions();
    options.memory_size = 256u << 20;
    StartServer(options);
    dir_ = (fsys::temp_directory_path() / absl::StrCat("cp_test_", ::getpid())).string();
    fsys::remove_all(dir_);
    fsys::create_directories(dir_);
    cp_ = absl::StrCat(BinDir(), "/ardma-cp --server=", testing::ClientAddress(server_->address()),
                       " ");
  }
  void TearDown() override { fsys::remove_all(dir_); }
  int Cp(const std::string& args, std::string* out) { return RunCommand(cp_ + args, out); }

  std::string dir_, cp_;
};

TEST_F(CpTest, TreeUpAcrossAndDownIsIdentical) {
  std::string out;
  ASSERT_EQ(RunCommand("cp -r /usr/include/linux " + dir_ + "/src", &out), 0) << out;
  EXPECT_EQ(Cp("-r " + dir_ + "/src dfs:/up", &out), 0) << out;
  // Across, on the server: one round trip for the whole tree.
  dfs::DfsClient fs(client_.get(), Mode::kActive);
  ASSERT_TRUE(fs.Lookup("/up").ok());
  uint64_t before = client_->counters().round_trips;
  absl::StatusOr<std::pair<uint64_t, uint64_t>> copied = fs.CopyTree("/up", "/across");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(client_->counters().round_trips - before, 1u);
  EXPECT_GT(copied->first, 500u);
  EXPECT_EQ(Cp("-r dfs:/across " + dir_ + "/back", &out), 0) << out;
  EXPECT_EQ(RunCommand("diff -r " + dir_ + "/src " + dir_ + "/back", &out), 0) << out;
  std::string a, b;
  ASSERT_EQ(RunCommand("cd " + dir_ + "/src && find . | sort", &a), 0);
  ASSERT_EQ(RunCommand("cd " + dir_ + "/back && find . | sort", &b), 0);
  EXPECT_EQ(a, b);
  // Also through the command line, DFS to DFS.
  EXPECT_EQ(Cp("-r dfs:/across dfs:/again", &out), 0) << out;
  EXPECT_EQ(fs.Lookup("/again/usb/ch9.h")->size, fsys::file_size(dir_ + "/src/usb/ch9.h"));
}

TEST_F(CpTest, LargeRandomFileRoundTripsByteForByte) {
  std::string data(40u << 20, '\0');
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < data.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  {
    std::ofstream f(dir_ + "/big", std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  std::string out;
  EXPECT_EQ(Cp(dir_ + "/big dfs:/big", &out), 0) << out;
  EXPECT_EQ(Cp("dfs:/big " + dir_ + "/big2", &out), 0) << out;
  EXPECT_EQ(RunCommand("cmp " + dir_ + "/big " + dir_ + "/big2", &out), 0) << out;
}

// A FIFO and a symbolic link back up the tree neither hang nor run away: the FIFO is reported,
// the links are copied as links, the rest is copied, and the exit status says something was not.
TEST_F(CpTest, SpecialFilesAreReportedAndLinksCopiedAsLinks) {
  fsys::create_directories(dir_ + "/t/d");
  std::ofstream(dir_ + "/t/d/file") << "data\n";
  ASSERT_EQ(::mkfifo((dir_ + "/t/pipe").c_str(), 0644), 0);
  fsys::create_directory_symlink("..", dir_ + "/t/d/up");
  fsys::create_symlink("file", dir_ + "/t/d/alias");
  std::string out;
  EXPECT_EQ(RunCommand("timeout 60 " + cp_ + "-r " + dir_ + "/t dfs:/t", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("cannot copy special file"));
  dfs::DfsClient fs(client_.get(), Mode::kActive);
  EXPECT_EQ(*fs.ReadFile("/t/d/file"), "data\n");
  EXPECT_EQ(*fs.Readlink("/t/d/alias"), "file");
  EXPECT_EQ(*fs.Readlink("/t/d/up"), "..");
  EXPECT_EQ(fs.Lookup("/t/pipe").status().code(), absl::StatusCode::kNotFound);
  // A tree of small files goes up many files per request.
  for (int i = 0; i < 300; ++i) std::ofstream(absl::StrCat(dir_, "/t/d/f", i)) << i;
  fsys::remove(dir_ + "/t/pipe");
  auto executes = [&] {
    return server_->server().handler().counters().Requests(
        static_cast<uint8_t>(wire::Op::kExecute));
  };
  uint64_t before = executes();
  EXPECT_EQ(Cp("-r " + dir_ + "/t dfs:/many", &out), 0) << out;
  EXPECT_LT(executes() - before, 20u);  // 300 files, one batch
  EXPECT_EQ(*fs.ReadFile("/many/d/f299"), "299");
}

TEST_F(CpTest, TargetsNoClobberPreserveVerboseAndErrors) {
  std::string out;
  {
    std::ofstream(dir_ + "/a") << "alpha\n";
    std::ofstream(dir_ + "/b") << "beta\n";
  }
  ::chmod((dir_ + "/a").c_str(), 0600);
  dfs::DfsClient fs(client_.get(), Mode::kActive);
  ASSERT_TRUE(fs.Mkdir("/d").ok());
  // Several sources into a directory, verbosely.
  EXPECT_EQ(Cp("-v " + dir_ + "/a " + dir_ + "/b dfs:/d", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("'", dir_, "/a' -> 'dfs:/d/a'")));
  EXPECT_EQ(*fs.ReadFile("/d/b"), "beta\n");
  // An existing file is overwritten, unless -n.
  EXPECT_EQ(Cp("dfs:/d/a dfs:/d/b", &out), 0) << out;
  EXPECT_EQ(*fs.ReadFile("/d/b"), "alpha\n");
  ASSERT_TRUE(fs.WriteFile("/d/b", "beta\n").ok());
  EXPECT_EQ(Cp("-n dfs:/d/a dfs:/d/b", &out), 0) << out;
  EXPECT_EQ(*fs.ReadFile("/d/b"), "beta\n");
  // -p keeps mode and mtime both ways.
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/a").c_str(), &st), 0);
  EXPECT_EQ(Cp("-p " + dir_ + "/a dfs:/p", &out), 0) << out;
  absl::StatusOr<dfs::Stat> p = fs.Lookup("/p");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mode, 0600u);
  EXPECT_EQ(absl::ToUnixSeconds(p->mtime), st.st_mtim.tv_sec);
  ASSERT_TRUE(fs.SetAttributes("/p", 0640, absl::FromUnixSeconds(1000000000)).ok());
  EXPECT_EQ(Cp("-p dfs:/p " + dir_ + "/p", &out), 0) << out;
  ASSERT_EQ(::stat((dir_ + "/p").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1000000000);
  // Errors: each reported, the rest still copied, exit 1.
  EXPECT_EQ(Cp("dfs:/nope dfs:/d " + dir_, &out), 1);
  EXPECT_THAT(out, HasSubstr("cannot stat 'dfs:/nope': No such file or directory"));
  EXPECT_THAT(out, HasSubstr("-r not specified; omitting directory 'dfs:/d'"));
  EXPECT_EQ(Cp("dfs:/d/a /nonexistent-dir/x", &out), 1);
  EXPECT_THAT(out, HasSubstr("cannot create regular file '/nonexistent-dir/x': No such file"));
  EXPECT_EQ(Cp("dfs:/d/a dfs:/d/b dfs:/d/a", &out), 1);  // several sources, target not a directory
  EXPECT_THAT(out, HasSubstr("target 'dfs:/d/a': Not a directory"));
  EXPECT_EQ(Cp(dir_ + "/a " + dir_ + "/c", &out), 1);  // both local
  EXPECT_EQ(Cp("-r dfs:/d dfs:/d/inside", &out), 1);
  EXPECT_THAT(out, HasSubstr("into itself"));
  EXPECT_EQ(Cp("dfs:/d/a", &out), 1);
  EXPECT_THAT(out, HasSubstr("missing destination"));
  EXPECT_EQ(Cp("--help", &out), 0);
  EXPECT_THAT(out, HasSubstr("--no-clobber"));
}

// The command-line library the binary is a thin main over.
absl::StatusOr<cp::Command> ParseCp(std::vector<std::string> args) {
  return testing::ParseArgv("ardma-cp", std::move(args), cp::ParseCommandLine);
}

TEST(CpCommandLineTest, ParsesOptionsAndOperandsLikeCp) {
  absl::StatusOr<cp::Command> c = ParseCp({"-rpv", "--fs=x", "a", "--", "-b", "dfs:/d"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->options.recursive);
  EXPECT_TRUE(c->options.preserve_mode && c->options.preserve_timestamps);
  EXPECT_TRUE(c->options.verbose);
  EXPECT_FALSE(c->options.no_clobber);
  EXPECT_EQ(c->fs, "x");
  EXPECT_EQ(c->operands, (std::vector<std::string>{"a", "-b", "dfs:/d"}));
  absl::StatusOr<cp::Command> spaced = ParseCp({"--server", "h:1", "--fs", "y", "a", "b"});
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_EQ(spaced->server, "h:1");
  EXPECT_EQ(spaced->fs, "y");
  EXPECT_EQ(ParseCp({"a", "b", "--server"}).status().message(),
            "option '--server' requires an argument");
  EXPECT_EQ(ParseCp({"-z", "a", "b"}).status().message(), "invalid option -- 'z'");
  EXPECT_EQ(ParseCp({"--bogus", "a", "b"}).status().message(), "unrecognized option '--bogus'");
  EXPECT_EQ(ParseCp({}).status().message(), "missing file operand");
  EXPECT_EQ(ParseCp({"a"}).status().message(), "missing destination file operand after 'a'");
  EXPECT_TRUE(ParseCp({"--help"})->help);
}

}  // namespace
}  // namespace ardma
