// ardma-cp against GNU cp, with GNU's result as the expected value: a crafted tree (symbolic links
// to files, to directories, dangling and up the tree, modes under the umask, odd names, empty and
// multi-megabyte files) and a real tree with many links (/usr/share/zoneinfo), uploaded and
// downloaded with -r, -rp, -a and -rv, and copied on the server; cp's errors, message for message
// and exit status for exit status. Both modes: the file system's code on the server and
// --mode=rdma.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/client/invoke.h"
#include "core/testing/run_command.h"
#include "core/testing/service_fixture.h"
#include "core/testing/tree_snapshot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using testing::BinDir;
using testing::RunCommandSplit;
using testing::TreeSnapshot;
namespace fsys = std::filesystem;

class CpGoldenTest : public testing::ServiceFixture<::testing::TestWithParam<Mode>> {
 protected:
  void SetUp() override {
    if (testing::OnCluster() && GetParam() == Mode::kRdma) {
      GTEST_SKIP() << "RDMA mode works on one server; a cluster's files take active mode";
    }
    ServerOptions options = testing::TestServerOptions();
    options.memory_size = 512u << 20;
    StartServices(options);
    dir_ = (fsys::temp_directory_path() / absl::StrCat("cp_golden_", ::getpid())).string();
    fsys::remove_all(dir_);
    fsys::create_directories(dir_);
    cp_ = absl::StrCat(fsys::absolute(BinDir()).string(), "/ardma-cp --mode=", ModeName(GetParam()),
                       " --server=", ToolAddress(), " ");
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    fsys::remove_all(dir_);
  }

  struct Run {
    int code;
    std::string out, err;
  };
  Run Gnu(const std::string& args) {
    Run r;
    r.code = RunCommandSplit("cd " + dir_ + " && LC_ALL=C cp " + args, &r.out, &r.err);
    return r;
  }
  Run Ours(const std::string& args) {
    Run r;
    r.code =
        RunCommandSplit("cd " + dir_ + " && LC_ALL=C timeout 120 " + cp_ + args, &r.out, &r.err);
    return r;
  }

  // Each command run by GNU cp inside dir_/SUB and by ardma-cp with dfs:/SUB/ before every
  // operand (a copy of that tree): the same exit status and messages.
  void ExpectSameOnBothSides(const std::string& sub, const std::vector<std::string>& commands) {
    std::string top = dir_;
    dir_ = top + "/" + sub;
    std::string prefix = "dfs:/" + sub + "/";
    for (const std::string& args : commands) {
      SCOPED_TRACE(args);
      Run g = Gnu(args);
      std::vector<std::string> words = absl::StrSplit(args, ' ');
      std::string ours_args;
      for (const std::string& w : words) {
        absl::StrAppend(&ours_args, ours_args.empty() ? "" : " ", w[0] == '-' ? w : prefix + w);
      }
      Run o = Ours(ours_args);
      EXPECT_EQ(o.code, g.code) << o.err;
      EXPECT_EQ(absl::StrReplaceAll(o.err, {{"ardma-cp: ", "cp: "}, {prefix, ""}}), g.err);
    }
    dir_ = top;
  }

  // The crafted tree at dir_/t.
  void Craft() {
    std::string t = dir_ + "/t";
    fsys::create_directories(t + "/sub/deeper");
    fsys::create_directories(t + "/private");
    fsys::create_directories(t + "/open");
    std::ofstream(t + "/plain") << "plain\n";
    std::ofstream(t + "/secret") << "secret\n";
    std::ofstream(t + "/script") << "#!/bin/sh\necho hi\n";
    std::ofstream(t + "/everyone") << "world-writable\n";
    std::ofstream(t + "/empty");
    std::ofstream(t + "/with space and 'quote'") << "odd name\n";
    std::ofstream(t + "/-leading-dash") << "dash\n";
    std::ofstream(t + "/\xc3\xa9t\xc3\xa9") << "utf-8\n";
    std::ofstream(t + "/" + std::string(255, 'n')) << "longest name\n";
    std::ofstream(t + "/sub/deeper/leaf") << "leaf\n";
    {
      std::ofstream big(t + "/sub/big", std::ios::binary);
      for (int i = 0; i < 300000; ++i) big << i << ' ';  // ~2 MB: streamed, not batched
    }
    ::chmod((t + "/secret").c_str(), 0600);
    ::chmod((t + "/script").c_str(), 0755);
    ::chmod((t + "/everyone").c_str(), 0777);  // 0755 after the umask, unless preserved
    ::chmod((t + "/private").c_str(), 0700);
    ::chmod((t + "/open").c_str(), 0777);
    fsys::create_symlink("plain", t + "/link-to-file");
    fsys::create_symlink("sub/deeper", t + "/link-to-dir");
    fsys::create_symlink("../..", t + "/sub/deeper/up");  // a loop if followed
    fsys::create_symlink("nowhere", t + "/dangling");
    fsys::create_symlink("/etc/hostname", t + "/absolute");
    struct timespec times[2] = {{1000000000, 123456789}, {1000000000, 123456789}};
    for (const char* p : {"plain", "sub", "sub/deeper/leaf", "private"}) {
      ::utimensat(AT_FDCWD, (t + "/" + p).c_str(), times, 0);
    }
  }

  std::string dir_, cp_;
  mode_t old_umask_ = 022;
};

INSTANTIATE_TEST_SUITE_P(Modes, CpGoldenTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

// Up and down again with each option set gives GNU cp's tree, exit status and messages.
TEST_P(CpGoldenTest, CraftedTreeUpAndDownMatchesGnuCp) {
  Craft();
  int n = 0;
  for (std::string opts : {"-r", "-rp", "-a", "-rv", "-R --preserve=mode"}) {
    SCOPED_TRACE(opts);
    std::string gnu = absl::StrCat("g", n), up = absl::StrCat("/u", n), ours = absl::StrCat("o", n);
    ++n;
    Run g = Gnu(opts + " t " + gnu);
    Run u = Ours(opts + " t dfs:" + up);
    EXPECT_EQ(u.code, g.code) << u.err;
    EXPECT_EQ(u.err, g.err);
    if (opts == "-rv") {  // one line per entry, as GNU's (whose order is the directory's)
      std::vector<std::string> want = absl::StrSplit(g.out, '\n'),
                               got = absl::StrSplit(u.out, '\n');
      for (std::string& line : want) {
        line = absl::StrReplaceAll(
            line, {{"-> '" + gnu, "-> 'dfs:" + up}, {"-> \"" + gnu, "-> \"dfs:" + up}});
      }
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want);
    }
    Run d = Ours(opts + " dfs:" + up + " " + ours);
    EXPECT_EQ(d.code, 0) << d.err;
    bool times = opts.find('p') != std::string::npos || opts == "-a";
    testing::SnapshotOptions so{.mtimes = times && opts.find("mode") == std::string::npos};
    EXPECT_EQ(TreeSnapshot(dir_ + "/" + ours, so), TreeSnapshot(dir_ + "/" + gnu, so));
  }
  // On the server: a tree copy gives what GNU cp -r of the same tree gives.
  Run g = Gnu("-r g2 g2copy");
  Run s = Ours("-r dfs:/u2 dfs:/u2copy");
  EXPECT_EQ(s.code, g.code) << s.err;
  ASSERT_EQ(Ours("-a dfs:/u2copy o2copy").code, 0);
  EXPECT_EQ(TreeSnapshot(dir_ + "/o2copy"), TreeSnapshot(dir_ + "/g2copy"));
  // -L follows every link: the tree without its loop.
  fsys::remove(dir_ + "/t/sub/deeper/up");
  Run gl = Gnu("-rL t gL");
  Run ul = Ours("-rL t dfs:/uL");
  EXPECT_EQ(ul.code, gl.code) << ul.err;
  ASSERT_EQ(Ours("-r dfs:/uL oL").code, 0);
  EXPECT_EQ(TreeSnapshot(dir_ + "/oL"), TreeSnapshot(dir_ + "/gL"));
}

// cp's errors, one by one, on the same names in the DFS and on disk.
TEST_P(CpGoldenTest, ErrorsAndExitStatusMatchGnuCp) {
  fsys::create_directories(dir_ + "/e/d0700");
  std::ofstream(dir_ + "/e/a") << "alpha\n";
  std::ofstream(dir_ + "/e/b") << "beta\n";
  fsys::create_symlink("nowhere", dir_ + "/e/dl");
  ::chmod((dir_ + "/e/d0700").c_str(), 0700);
  ASSERT_EQ(Ours("-a e dfs:/e").code, 0);
  ExpectSameOnBothSides(
      "e", {"a nodir/", "a a", "a ./a", "dl x", "-r d0700 d0700/sub", "-r nonexist t",
            "-r d0700 a", "d0700 t5", "a b/", "a b c", "-n a b", "a b", "-T a d0700", "-t a b",
            "-r d0700 newdir/"});
}

// Destinations that are symbolic links, from each side (uploading, downloading, on the server):
// GNU cp writes through a link to a file and refuses a dangling one; a missing directory on the
// way is "cannot create regular file"; every message, exit status and resulting tree as GNU's.
TEST_P(CpGoldenTest, LinkDestinationsMatchGnuCpInEveryDirection) {
  std::ofstream(dir_ + "/s") << "source\n";
  ASSERT_EQ(Ours("s dfs:/s").code, 0);
  for (std::string tree : {"ref", "down", "up", "srv"}) {
    bool remote = tree == "up" || tree == "srv";
    std::string local = dir_ + "/" + (remote ? "stage-" + tree : tree);
    fsys::create_directories(local);
    std::ofstream(local + "/t") << "old\n";
    fsys::create_symlink("t", local + "/lt");
    fsys::create_symlink("nowhere", local + "/dang");
    if (remote) {
      ASSERT_EQ(Ours("-a stage-" + tree + " dfs:/" + tree).code, 0);
    }
  }
  for (std::string dst : {"lt", "dang", "nodir/x", "t/x"}) {
    SCOPED_TRACE(dst);
    Run g = Gnu("s ref/" + dst);
    for (const auto& [src, to, from] : std::vector<std::array<std::string, 3>>{
             {"s", "dfs:/up/", "dfs:/up/"},
             {"dfs:/s", "down/", "down/"},
             {"dfs:/s", "dfs:/srv/", "dfs:/srv/"}}) {
      SCOPED_TRACE(src + " " + to);
      Run o = Ours(src + " " + to + dst);
      EXPECT_EQ(o.code, g.code) << o.err;
      EXPECT_EQ(absl::StrReplaceAll(o.err, {{"ardma-cp: ", "cp: "}, {from, "ref/"}}), g.err);
    }
  }
  ASSERT_EQ(Ours("-a dfs:/up up").code, 0);
  ASSERT_EQ(Ours("-a dfs:/srv srv").code, 0);
  for (std::string tree : {"down", "up", "srv"}) {
    EXPECT_EQ(TreeSnapshot(dir_ + "/" + tree), TreeSnapshot(dir_ + "/ref")) << tree;
  }
  // A tree uploaded onto the same names (the batched path): written through the link to a
  // file, refused at the dangling one, with -r and with -a (which sets the target's mode).
  fsys::create_directories(dir_ + "/tsrc");
  for (std::string name : {"lt", "dang", "fresh"}) {
    std::ofstream(dir_ + "/tsrc/" + name) << "tree " << name << "\n";
  }
  ::chmod((dir_ + "/tsrc/lt").c_str(), 0600);
  for (std::string opts : {"-r", "-a"}) {
    SCOPED_TRACE(opts);
    for (std::string tree : {"tref", "stage-tup"}) {
      fsys::remove_all(dir_ + "/" + tree);
      fsys::create_directories(dir_ + "/" + tree);
      std::ofstream(dir_ + "/" + tree + "/t") << "old\n";
      fsys::create_symlink("t", dir_ + "/" + tree + "/lt");
      fsys::create_symlink("nowhere", dir_ + "/" + tree + "/dang");
    }
    ASSERT_EQ(Ours("-a stage-tup dfs:/tup" + opts).code, 0);
    Run g = Gnu(opts + " tsrc/. tref");
    Run o = Ours(opts + " tsrc/. dfs:/tup" + opts);
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(absl::StrReplaceAll(o.err, {{"ardma-cp: ", "cp: "}, {"dfs:/tup" + opts, "tref"}}),
              g.err);
    ASSERT_EQ(Ours("-a dfs:/tup" + opts + " tup" + opts).code, 0);
    EXPECT_EQ(TreeSnapshot(dir_ + "/tup" + opts), TreeSnapshot(dir_ + "/tref"));
  }
}

// --no-preserve after -a or -p (a new copy then gets 0666 or 0777 less the umask, as a new file),
// and cp -r d d/sub, which copies what it can before refusing the copy into itself and then
// leaves the rest of every directory around it: on the server, and downloaded, the trees GNU cp
// makes. (Which entries come before the destination is readdir order for GNU and sorted names
// for us, so the trees copied into themselves hold nothing else.)
TEST_P(CpGoldenTest, NoPreserveAndCopiesIntoThemselvesMatchGnuCp) {
  std::string l = dir_ + "/l";
  fsys::create_directories(l + "/d/s");
  fsys::create_directories(l + "/e");
  fsys::create_directories(l + "/c/s");
  std::ofstream(l + "/a") << "alpha\n";
  std::ofstream(l + "/d/f") << "f\n";
  std::ofstream(l + "/d/s/g") << "g\n";
  ::chmod((l + "/a").c_str(), 0600);
  ::chmod((l + "/d").c_str(), 0750);
  ASSERT_EQ(Ours("-a l dfs:/l").code, 0);
  ExpectSameOnBothSides("l", {"-a --no-preserve=mode a m1", "-p --no-preserve=timestamps a m2",
                              "-a --no-preserve=all a m3", "-a --no-preserve=mode d dm",
                              "-r e e/sub", "-r c c/s/deeper", "-r c/s c/s/x/y"});
  // Downloaded with its modes, the DFS tree is the local one (upload and download with -a keep
  // what the copies on either side made).
  ASSERT_EQ(Ours("-a dfs:/l back").code, 0);
  EXPECT_EQ(TreeSnapshot(dir_ + "/back"), TreeSnapshot(l));
  // Uploads and downloads honour --no-preserve too.
  Run g = Gnu("-a --no-preserve=mode l/a l/up-m");
  ASSERT_EQ(Ours("-a --no-preserve=mode l/a dfs:/up-m").code, 0);
  ASSERT_EQ(Ours("-a --no-preserve=mode dfs:/l/a down-m").code, 0);
  ASSERT_EQ(Ours("-a dfs:/up-m up-m").code, 0);
  struct stat want, up, down;
  ASSERT_EQ(::stat((l + "/up-m").c_str(), &want), 0);
  ASSERT_EQ(::stat((dir_ + "/up-m").c_str(), &up), 0);
  ASSERT_EQ(::stat((dir_ + "/down-m").c_str(), &down), 0);
  EXPECT_EQ(up.st_mode & 07777, want.st_mode & 07777);
  EXPECT_EQ(down.st_mode & 07777, want.st_mode & 07777);
}

// -u replaces only older files (a tree too), and --parents makes SOURCE's directories under
// DIRECTORY with their modes: uploading, downloading and on the server, what GNU cp makes, -v's
// lines included.
TEST_P(CpGoldenTest, UpdateAndParentsMatchGnuCp) {
  auto stamp = [&](const std::string& path, int64_t seconds) {
    struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
    ::utimensat(AT_FDCWD, (dir_ + "/" + path).c_str(), times, 0);
  };
  // Sources: src/{older,newer,same}; destinations hold the same names with other contents.
  fsys::create_directories(dir_ + "/src");
  for (std::string name : {"older", "newer", "same"}) {
    std::ofstream(dir_ + "/src/" + name) << "source " << name << "\n";
  }
  stamp("src/older", 1000000000);
  stamp("src/newer", 1000000200);
  stamp("src/same", 1000000100);
  ASSERT_EQ(Ours("-a src dfs:/src").code, 0);
  for (std::string tree : {"ref", "down", "up", "srv"}) {
    fsys::create_directories(dir_ + "/" + tree);
    for (std::string name : {"older", "newer", "same"}) {
      std::ofstream(dir_ + "/" + tree + "/" + name) << "destination " << name << "\n";
      stamp(tree + "/" + name, 1000000100);
    }
    if (tree == "up" || tree == "srv") {
      ASSERT_EQ(Ours("-a " + tree + " dfs:/" + tree).code, 0);
      fsys::remove_all(dir_ + "/" + tree);
    }
  }
  Run g = Gnu("-uv src/older src/newer src/same src/missing-too ref");
  for (const auto& [src, to, from] : std::vector<std::array<std::string, 3>>{
           {"src/", "dfs:/up", "dfs:/up"}, {"dfs:/src/", "down", "down"},
           {"dfs:/src/", "dfs:/srv", "dfs:/srv"}}) {
    SCOPED_TRACE(src + " " + to);
    Run o = Ours(absl::StrCat("-uv ", src, "older ", src, "newer ", src, "same ", src,
                              "missing-too ", to));
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(absl::StrReplaceAll(o.out, {{"'dfs:/src/", "'src/"}, {from, "ref"}}), g.out);
  }
  ASSERT_EQ(Ours("-a dfs:/up up").code, 0);
  ASSERT_EQ(Ours("-a dfs:/srv srv").code, 0);
  for (std::string tree : {"down", "up", "srv"}) {
    EXPECT_EQ(TreeSnapshot(dir_ + "/" + tree), TreeSnapshot(dir_ + "/ref")) << tree;
  }
  // A tree with -u: only the newer file goes.
  g = Gnu("-ruT src ref");
  EXPECT_EQ(Ours("-ruT dfs:/src down").code, g.code);
  EXPECT_EQ(Ours("-ruT src dfs:/up").code, g.code);
  ASSERT_EQ(Ours("-a dfs:/up up2").code, 0);
  EXPECT_EQ(TreeSnapshot(dir_ + "/down"), TreeSnapshot(dir_ + "/ref"));
  EXPECT_EQ(TreeSnapshot(dir_ + "/up2"), TreeSnapshot(dir_ + "/ref"));

  // --parents: a/b/c under DIRECTORY, a/b made with b's mode (0700).
  fsys::create_directories(dir_ + "/p/a/b");
  std::ofstream(dir_ + "/p/a/b/c") << "c\n";
  ::chmod((dir_ + "/p/a/b").c_str(), 0700);
  ASSERT_EQ(Ours("-a p/a dfs:/a").code, 0);
  for (std::string d : {"pref", "pdown"}) fsys::create_directories(dir_ + "/" + d);
  ASSERT_EQ(Ours("-r pref dfs:/pup").code, 0);
  ASSERT_EQ(Ours("-r pref dfs:/psrv").code, 0);
  dir_ += "/p";
  g = Gnu("-v --parents a/b/c ../pref");
  dir_.resize(dir_.size() - 2);
  Run up = Ours("-v --parents p/a/b/c dfs:/pup");  // (the source's name is p/a/b/c here)
  EXPECT_EQ(up.code, g.code) << up.err;
  Run down = Ours("-v --parents dfs:/a/b/c pdown");
  EXPECT_EQ(down.code, g.code) << down.err;
  EXPECT_EQ(absl::StrReplaceAll(down.out, {{"dfs:/a", "a"}, {"pdown", "../pref"}}), g.out);
  Run srv = Ours("-v --parents dfs:/a/b/c dfs:/psrv");
  EXPECT_EQ(srv.code, g.code) << srv.err;
  EXPECT_EQ(absl::StrReplaceAll(srv.out, {{"dfs:/psrv", "../pref"}, {"dfs:/a", "a"}}), g.out);
  ASSERT_EQ(Ours("-a dfs:/psrv psrv").code, 0);
  ASSERT_EQ(Ours("-a dfs:/pup/p pup").code, 0);
  EXPECT_EQ(TreeSnapshot(dir_ + "/pdown"), TreeSnapshot(dir_ + "/pref"));
  EXPECT_EQ(TreeSnapshot(dir_ + "/psrv"), TreeSnapshot(dir_ + "/pref"));
  EXPECT_EQ(TreeSnapshot(dir_ + "/pup"), TreeSnapshot(dir_ + "/pref"));
  // Not into a directory: GNU's usage error.
  g = Gnu("--parents p/a/b/c p/a/b/c");
  Run bad = Ours("--parents dfs:/a/b/c dfs:/a/b/c");
  EXPECT_EQ(bad.code, g.code);
  EXPECT_EQ(absl::StrReplaceAll(bad.err, {{"ardma-cp", "cp"}}), g.err);
}

// A FIFO is reported and skipped (GNU recreates it; the file system cannot hold one), without
// blocking; a /proc file whose size says 0 is copied whole.
TEST_P(CpGoldenTest, SpecialFilesAreSkippedAndProcFilesCopiedWhole) {
  fsys::create_directories(dir_ + "/f/d");
  std::ofstream(dir_ + "/f/d/file") << "data\n";
  ASSERT_EQ(::mkfifo((dir_ + "/f/pipe").c_str(), 0644), 0);
  Run r = Ours("-r f dfs:/f");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "ardma-cp: cannot copy special file 'f/pipe': the file system holds no FIFOs, "
            "sockets or devices\n");
  ASSERT_EQ(Ours("-r dfs:/f back").code, 0);
  fsys::remove(dir_ + "/f/pipe");
  EXPECT_EQ(TreeSnapshot(dir_ + "/back"), TreeSnapshot(dir_ + "/f"));  // all but the FIFO
  ASSERT_EQ(Ours("/proc/version dfs:/version").code, 0);
  ASSERT_EQ(Ours("dfs:/version version").code, 0);
  std::ifstream want("/proc/version"), got(dir_ + "/version");
  std::stringstream w, g;
  w << want.rdbuf();
  g << got.rdbuf();
  EXPECT_FALSE(g.str().empty());
  EXPECT_EQ(g.str(), w.str());
}

// A real tree the other tests do not use, with hundreds of symbolic links.
TEST_P(CpGoldenTest, RealTreeWithLinksMatchesGnuCpArchive) {
  // All of it in active mode; in RDMA mode (a round trip per step) one part of it.
  std::string tree =
      GetParam() == Mode::kActive ? "/usr/share/zoneinfo" : "/usr/share/zoneinfo/America";
  // A reference missing is a failure, not a skip: scripts/setup.sh installs tzdata.
  ASSERT_TRUE(fsys::exists(tree)) << "no " << tree << ": install tzdata (scripts/setup.sh does)";
  Run g = Gnu("-a " + tree + " gz");
  Run u = Ours("-a " + tree + " dfs:/zoneinfo");
  EXPECT_EQ(u.code, g.code) << u.err;
  EXPECT_EQ(u.err, g.err);
  ASSERT_EQ(Ours("-a dfs:/zoneinfo oz").code, 0);
  testing::SnapshotOptions so{.mtimes = true};
  EXPECT_EQ(TreeSnapshot(dir_ + "/oz", so), TreeSnapshot(dir_ + "/gz", so));
}

}  // namespace
}  // namespace ardma
