// ardma-find against GNU find on a crafted tree (symbolic links to files and directories,
// dangling and looping ones, modes, times, empty files and directories, odd names), built in the
// DFS in the order GNU find walks it locally, so outputs compare line for line. Tests, -prune,
// -depth, -printf, -regex, -newermt, the -exec family and -delete; output and exit status must be
// GNU's. Both modes: evaluated on the server and --mode=rdma.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/client/invoke.h"
#include "core/testing/real_tree.h"
#include "core/testing/run_command.h"
#include "core/testing/service_fixture.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

namespace ardma {
namespace {

using testing::BinDir;
using testing::RunCommandSplit;
namespace fsys = std::filesystem;

class FindGoldenTest : public testing::ServiceFixture<::testing::TestWithParam<Mode>> {
 protected:
  void SetUp() override {
    if (testing::OnCluster() && GetParam() == Mode::kRdma) {
      GTEST_SKIP() << "RDMA mode works on one server; a cluster's files take active mode";
    }
    StartServices(testing::TestServerOptions());
    dir_ = (fsys::temp_directory_path() / absl::StrCat("find_golden_", ::getpid())).string();
    fsys::remove_all(dir_);
    Craft(dir_ + "/t");
    Replicate("t");
    find_ =
        absl::StrCat(fsys::absolute(BinDir()).string(), "/ardma-find --mode=", ModeName(GetParam()),
                     " --server=", ToolAddress(), " ");
  }
  void TearDown() override { fsys::remove_all(dir_); }

  static void Craft(const std::string& t) {
    fsys::create_directories(t + "/sub/deeper");
    fsys::create_directories(t + "/emptydir");
    fsys::create_directories(t + "/chain/of/empty/dirs");
    fsys::create_directories(t + "/private");
    std::ofstream(t + "/plain") << "plain\n";
    std::ofstream(t + "/a1") << "a1\n";
    std::ofstream(t + "/b22") << "b22 b22\n";
    std::ofstream(t + "/empty");
    std::ofstream(t + "/with space") << "space\n";
    std::ofstream(t + "/new\nline") << "a newline in the name\n";
    fsys::create_symlink("new\nline", t + "/link\nto newline");
    std::ofstream(t + "/x.tmp") << "tmp\n";
    std::ofstream(t + "/sub/s.tmp") << "tmp\n";
    std::ofstream(t + "/sub/code.c") << "int main() { return 0; }\n";
    std::ofstream(t + "/sub/deeper/leaf") << std::string(5000, 'l');
    ::chmod((t + "/plain").c_str(), 0600);
    ::chmod((t + "/private").c_str(), 0700);
    ::chmod((t + "/sub/code.c").c_str(), 0755);
    fsys::create_symlink("plain", t + "/link-to-file");
    fsys::create_symlink("sub/deeper", t + "/link-to-dir");
    fsys::create_symlink("../..", t + "/sub/deeper/up");
    fsys::create_symlink("nowhere", t + "/dangling");
    int64_t when = 1000000000;  // 2001-09-09, a second at a time
    std::vector<std::string> all;
    for (const auto& e : fsys::recursive_directory_iterator(t)) all.push_back(e.path().string());
    all.push_back(t);
    for (const std::string& p : all) {
      struct timespec times[2] = {{when, 500000000}, {when, 500000000}};
      ::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW);
      when += 1;
    }
  }

  // The local tree into the DFS, in GNU find's walk order (a directory's entries are listed in
  // creation order, so the DFS walk order is the local one); attributes as on disk.
  void Replicate(const std::string& rel, std::string base = "") {
    if (base.empty()) base = dir_;
    dfs::DfsClient fs(servers(), Mode::kActive);
    std::string listing;
    ASSERT_EQ(RunCommandSplit("cd " + base + " && LC_ALL=C find " + rel + " -print0", &listing), 0);
    std::vector<std::string> paths = absl::StrSplit(listing, '\0', absl::SkipEmpty());
    for (const std::string& p : paths) {
      std::string local = base + "/" + p, remote = "/" + p;
      struct stat st;
      ASSERT_EQ(::lstat(local.c_str(), &st), 0) << local;
      if (S_ISDIR(st.st_mode)) {
        ASSERT_TRUE(fs.Mkdir(remote, st.st_mode & 07777).ok()) << remote;
      } else if (S_ISLNK(st.st_mode)) {
        ASSERT_TRUE(fs.Symlink(fsys::read_symlink(local).string(), remote).ok()) << remote;
      } else {
        std::ifstream in(local, std::ios::binary);
        std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_TRUE(fs.WriteFile(remote, data, st.st_mode & 07777).ok()) << remote;
      }
    }
    for (auto it = paths.rbegin(); it != paths.rend(); ++it) {  // times after contents
      struct stat st;
      ::lstat((base + "/" + *it).c_str(), &st);
      ASSERT_TRUE(fs.SetAttributes("/" + *it, st.st_mode & 07777,
                                   absl::FromUnixNanos(int64_t{st.st_mtim.tv_sec} * 1000000000 +
                                                       st.st_mtim.tv_nsec))
                      .ok());
    }
  }

  struct Run {
    int code;
    std::string out, err;
  };
  Run Gnu(const std::string& args, const std::string& in = "") {
    Run r;
    r.code = RunCommandSplit("cd " + (in.empty() ? dir_ : in) + " && LC_ALL=C find " + args, &r.out,
                             &r.err);
    return r;
  }
  Run Ours(const std::string& roots, const std::string& expr) {
    Run r;
    r.code = RunCommandSplit("cd " + dir_ + " && LC_ALL=C " + find_ + roots + " " + expr, &r.out,
                             &r.err);
    r.out = absl::StrReplaceAll(r.out, {{"dfs:/", ""}});
    r.err = absl::StrReplaceAll(r.err, {{"ardma-find: ", "find: "}, {"dfs:/", ""}});
    return r;
  }

  std::string dir_, find_;
};

// `text`'s lines in byte order (a removal moves a directory's newest entry into the gap, so the
// walk's order changes; names with newlines make several lines, the same on both sides).
std::string SortedLines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::sort(lines.begin(), lines.end());
  return absl::StrJoin(lines, "\n");
}

INSTANTIATE_TEST_SUITE_P(Modes, FindGoldenTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

TEST_P(FindGoldenTest, ExpressionsMatchGnuFind) {
  for (std::string expr : {
           "",
           "-type l",
           "-type f,l",
           "-type d -empty",
           "-empty",
           "-regex '.*/[ab][0-9]+'",
           "-iregex '.*PLAIN'",
           "-regextype posix-extended -regex '.*/(a1|b22)'",
           "-ipath '*SUB*'",
           "-name sub -prune -o -print",
           "-name sub -prune -o -type f -print",
           "-depth",
           "-depth -type d",
           "-d -name '*.tmp'",
           "-type f -printf '%p %y %m %s %d %f %h %P\\n'",
           "-printf '%M %y|%-12f|%5d\\n'",
           "-type f -printf '%TY-%Tm-%Td %TT %T@ %t\\n'",
           "-type l -printf '%p -> %l\\n'",
           "-newermt '2001-09-09 01:46:50'",
           "-newermt @1000000010",
           "-mmin -5",
           "-mmin +5 -type f",
           "-mtime +1000",
           "-name '*.c' , -name 'p*'",
           "-name '*.tmp' -exec echo found {} \\;",
           "-type f -exec echo {} +",
           "-type f -exec false \\;",
           "-name '*.c' -exec false {} +",
           "-name 'a*' -ok echo {} \\;",
           "-maxdepth 1 -type f -size -1k",
           "-perm-bogus",
           "-type q",
           "-regex '\\('",
       }) {
    SCOPED_TRACE(expr);
    Run g = Gnu("t " + expr + " </dev/null");
    Run o = Ours("dfs:/t", expr + " </dev/null");
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(o.out, g.out);
    if (g.code == 0) {
      EXPECT_EQ(o.err, g.err);
    }
  }
  // Starting points: several, a file, a file with a slash (not a directory), missing.
  Run g = Gnu("t/plain t/sub t/plain/ t/missing");
  Run o = Ours("dfs:/t/plain dfs:/t/sub dfs:/t/plain/ dfs:/t/missing", "");
  EXPECT_EQ(o.code, g.code);
  EXPECT_EQ(o.out, g.out);
  EXPECT_EQ(o.err, g.err);
}

// Symbolic links: -P (the default) never follows them, -H those given as starting points, -L
// (and -follow) all, with GNU's loop message; a path through a link to a directory is that
// directory; %Y is the target's type (N for a dangling link).
TEST_P(FindGoldenTest, SymbolicLinksMatchGnuFind) {
  for (const auto& [options, roots, expr] : std::vector<std::array<std::string, 3>>{
           {"", "t/link-to-dir", ""},
           {"", "t/link-to-dir/", ""},
           {"-P", "t/link-to-dir t/link-to-file", "-printf '%p %y %Y %s\\n'"},
           {"-H", "t/link-to-dir", ""},
           {"-H", "t/link-to-file t/dangling", "-printf '%p %y %Y %s %l|\\n'"},
           {"-H", "t/link-to-file/", ""},
           {"-L", "t", ""},
           {"-L", "t", "-type l"},
           {"-L", "t", "-printf '%p %y %Y %d %l|\\n'"},
           {"-L", "t", "-depth"},
           {"-L", "t/sub", "-maxdepth 3"},
           {"-L", "t/link-to-dir", "-mindepth 1"},
           {"-L", "t", "-name deeper -prune -o -print"},
           {"-L", "t/dangling/", ""},
           {"", "t", "-follow -type d"},
           {"", "t", "-printf '%p %y %Y\\n'"},
           {"-H -P", "t/link-to-dir", ""},
           {"-P -L", "t/link-to-dir/up", "-maxdepth 1"},
           {"", "t/link-to-dir/leaf t/link-to-dir/up/sub/code.c", ""},
           {"", "t/link-to-file/x", ""},
       }) {
    SCOPED_TRACE(options + " " + roots + " " + expr);
    std::string ours_roots;
    for (absl::string_view r : absl::StrSplit(roots, ' ')) absl::StrAppend(&ours_roots, " dfs:/", r);
    Run g = Gnu(options + " " + roots + " " + expr);
    Run o = Ours(options + ours_roots, expr);
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(o.out, g.out);
    EXPECT_EQ(o.err, g.err);
  }
}

// A real tree the other tests do not use: the test's copy of Debian's Perl modules, with links
// of every kind added on purpose (the host's own are left out).
TEST_P(FindGoldenTest, RealTreeMatchesGnuFind) {
  // A reference missing is a failure, not a skip: git (scripts/setup.sh) puts modules there.
  ASSERT_TRUE(fsys::exists("/usr/share/perl5")) << "no /usr/share/perl5: run scripts/setup.sh";
  ASSERT_TRUE(testing::CopyRealTree("/usr/share/perl5", dir_ + "/perl5").ok());
  Replicate("perl5");
  for (std::string expr :
       {"", "-type d", "-name '*.pm' -size +4k", "-path '*/DebConf/*' -prune -o -print",
        "-regex '.*/[A-Z][a-z]+\\.pm' -printf '%f %s %m\\n'", "-depth -empty",
        "-mindepth 2 -maxdepth 3 -type f -newermt 2000-01-01", "-type l -printf '%p %Y %l\\n'",
        "-L . -name '*.pm' -size +20k", "-H . -maxdepth 1"}) {
    SCOPED_TRACE(expr);
    // (-L and -H come before the starting point: ". " marks where the expression starts.)
    std::string options, rest = expr;
    if (absl::StartsWith(expr, "-L . ") || absl::StartsWith(expr, "-H . ")) {
      options = expr.substr(0, 3);
      rest = expr.substr(5);
    }
    Run g = Gnu(options + "perl5 " + rest);
    Run o = Ours(options + "dfs:/perl5", rest);
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(o.out, g.out);
    EXPECT_EQ(o.err, g.err);
  }
}

TEST_P(FindGoldenTest, DeleteRemovesWhatGnuFindRemoves) {
  Run g = Gnu("t -name '*.tmp' -delete -o -name emptydir -delete");
  Run o = Ours("dfs:/t", "-name '*.tmp' -delete -o -name emptydir -delete");
  EXPECT_EQ(o.code, g.code) << o.err;
  // (Sorted: a removal moves the directory's newest entry into the gap, so the order changes.)
  Run after_g = Gnu("t");
  Run after_o = Ours("dfs:/t", "");
  EXPECT_EQ(SortedLines(after_o.out), SortedLines(after_g.out));
  // A directory that is not empty is reported and kept.
  g = Gnu("t -name sub -delete");
  o = Ours("dfs:/t", "-name sub -delete");
  EXPECT_EQ(o.code, g.code);
  EXPECT_EQ(o.err, g.err);
}

// -delete implies -depth, and a directory emptied by it is -empty when the walk reaches it: a
// chain of empty directories goes whole, in GNU's order.
TEST_P(FindGoldenTest, EmptyDeleteRemovesWholeChainsOfEmptyDirectories) {
  Run g = Gnu("t -empty -delete -print");
  Run o = Ours("dfs:/t", "-empty -delete -print");
  EXPECT_EQ(o.code, g.code) << o.err;
  EXPECT_EQ(o.out, g.out);
  EXPECT_NE(g.out.find("t/chain\n"), std::string::npos) << g.out;
  Run after_g = Gnu("t");
  Run after_o = Ours("dfs:/t", "");
  EXPECT_EQ(SortedLines(after_o.out), SortedLines(after_g.out));
}

}  // namespace
}  // namespace ardma
