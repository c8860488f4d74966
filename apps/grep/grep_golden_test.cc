// ardma-grep against GNU grep 3.8 on crafted files: GNU's BRE/ERE dialect where RE2's differs
// (a{,3}, a**, a{2}{3}, a leading ERE repetition, [=a=], [.-.]), -P (PCRE2), -A 0 and group
// separators,
// -b, -z, -a, -f, --include/--exclude/--exclude-dir, -v -c '', -r on one file, colours in
// context lines and $GREP_COLORS. Output, messages and exit status must be GNU's, in both modes.
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

class GrepGoldenTest : public testing::ServiceFixture<::testing::TestWithParam<Mode>> {
 protected:
  void SetUp() override {
    if (testing::OnCluster() && GetParam() == Mode::kRdma) {
      GTEST_SKIP() << "RDMA mode works on one server; a cluster's files take active mode";
    }
    StartServices(testing::TestServerOptions());
    dir_ = (fsys::temp_directory_path() / absl::StrCat("grep_golden_", ::getpid())).string();
    fsys::remove_all(dir_);
    fsys::create_directories(dir_ + "/tree/sub");
    fsys::create_directories(dir_ + "/tree/skip");
    Put("text", "+x\nx\naab\nb\naaaab\n*x\n{x\na{x\naaaaaa\n-\na\nend of a\nbetween\nalpha\n");
    Put("more", "alpha beta\ngamma\nalphabet\n\ndelta alpha\n");
    Put("binary", std::string("match here\n\0\1\2 binary\nmatch again\n", 35));
    Put("records", std::string("first\nrecord\0second alpha\0third\0", 33));
    Put("patterns", "alpha\nb.t\n");
    Put("refs", "abab\nabcabc x\nxyzzy\naa bb aabb\nabba\nfoo foo bar\nABab\nAbAB\n");
    Put("latin1", "caf\xe9\nCAF\xc9\n\xe0 la\n\xc0 LA\nplain\n");
    Put("p-e-acute", "[\xe9]\n");
    Put("p-range", "[\xe0-\xe9]\n");
    Put("p-alt", "caf\xc9|zz.\n");
    Put("p-class", "CAF[[:upper:]\xe9]\n");
    Put("words", "abc\n\n x \nfoo bar\n-\nxx yy\naxb\nx\n  \naxb bxbz\nab abab\n");
    Put("nopatterns", "");
    Put("tree/a.c", "int alpha;\n");
    Put("tree/b.h", "alpha\n");
    Put("tree/sub/c.c", "alpha beta\n");
    Put("tree/skip/d.c", "alpha\n");
    grep_ =
        absl::StrCat(fsys::absolute(BinDir()).string(), "/ardma-grep --mode=", ModeName(GetParam()),
                     " --server=", ToolAddress(), " ");
  }
  void TearDown() override { fsys::remove_all(dir_); }

  void Put(const std::string& name, const std::string& data) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << data;
    dfs::DfsClient fs(servers(), Mode::kActive);
    for (std::string d : {"/g", "/g/tree", "/g/tree/sub", "/g/tree/skip"})
      fs.Mkdir(d).IgnoreError();
    ASSERT_TRUE(fs.WriteFile("/g/" + name, data).ok()) << name;
  }

  struct Run {
    int code;
    std::string out, err;
  };
  // `args` names files as FILE; GNU runs in the local copy, ours on dfs:/g/FILE.
  Run Gnu(const std::string& args, const std::vector<std::string>& files) {
    Run r;
    r.code = RunCommandSplit(
        absl::StrCat("cd ", dir_, " && LC_ALL=C grep ", args, " ", absl::StrJoin(files, " ")),
        &r.out, &r.err);
    return r;
  }
  Run Ours(const std::string& args, const std::vector<std::string>& files) {
    Run r;
    std::string operands;
    for (const std::string& f : files) absl::StrAppend(&operands, " dfs:/g/", f);
    r.code = RunCommandSplit(absl::StrCat("cd ", dir_, " && LC_ALL=C ", grep_, args, operands),
                             &r.out, &r.err);
    r.out = absl::StrReplaceAll(r.out, {{"dfs:/g/", ""}});
    r.err = absl::StrReplaceAll(r.err, {{"ardma-grep: ", "grep: "}, {"dfs:/g/", ""}});
    return r;
  }

  // Uploads the local tree `local` to DFS `remote` as it is: symbolic links stay links.
  void Upload(const std::string& local, const std::string& remote) {
    dfs::DfsClient fs(servers(), Mode::kActive);
    ASSERT_TRUE(fs.Mkdir(remote).ok() || fs.Lookup(remote).ok()) << remote;
    for (const auto& e : fsys::recursive_directory_iterator(local)) {
      std::string rel = remote + e.path().string().substr(local.size());
      if (e.is_symlink()) {
        ASSERT_TRUE(fs.Symlink(fsys::read_symlink(e.path()).string(), rel).ok()) << rel;
      } else if (e.is_directory()) {
        ASSERT_TRUE(fs.Mkdir(rel).ok() || fs.Lookup(rel).ok()) << rel;
      } else if (e.is_regular_file()) {
        std::ifstream in(e.path(), std::ios::binary);
        std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_TRUE(fs.WriteFile(rel, data).ok()) << rel;
      }
    }
  }

  // GNU grep in `dir_` against ours with the operands under dfs:/g, stdout and stderr each
  // sorted (-r's order is GNU's readdir order, ours sorted paths).
  void ExpectSameSorted(const std::string& args, const std::vector<std::string>& files) {
    std::string operands, ours_operands;
    for (const std::string& f : files) {
      absl::StrAppend(&operands, " '", f, "'");
      absl::StrAppend(&ours_operands, " 'dfs:/g/", f, "'");
    }
    SCOPED_TRACE(args + operands);
    Run g, o;
    g.code = RunCommandSplit(
        absl::StrCat("cd ", dir_, " && LC_ALL=C grep ", args, operands), &g.out, &g.err);
    o.code = RunCommandSplit(absl::StrCat("cd ", dir_, " && LC_ALL=C ", grep_, args, ours_operands),
                             &o.out, &o.err);
    o.out = absl::StrReplaceAll(o.out, {{"dfs:/g/", ""}});
    o.err = absl::StrReplaceAll(o.err, {{"ardma-grep: ", "grep: "}, {"dfs:/g/", ""}});
    for (Run* r : {&g, &o}) {
      for (std::string* text : {&r->out, &r->err}) {
        std::vector<std::string> lines = absl::StrSplit(*text, '\n');
        std::sort(lines.begin(), lines.end());
        *text = absl::StrJoin(lines, "\n");
      }
    }
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(o.out, g.out);
    EXPECT_EQ(o.err, g.err);
  }

  std::string dir_, grep_;
};

INSTANTIATE_TEST_SUITE_P(Modes, GrepGoldenTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

TEST_P(GrepGoldenTest, DialectOptionsAndOutputMatchGnuGrep) {
  struct Case {
    std::string args;
    std::vector<std::string> files;
    bool sort = false;  // -r: GNU's order is the directory's
  };
  const std::vector<std::string> text = {"text"}, two = {"text", "more"};
  const std::vector<Case> cases = {
      {"-E 'a{,3}b'", text},
      {"-E -o 'a**'", text},
      {"-E -o 'a{2}{3}'", text},
      {"-E 'a{x'", text},
      {"-c 'a\\{,3\\}b'", text},
      {"-o 'a**'", text},
      {"-o '\\(a\\)*'", text},
      {"'*x'", text},
      {"-c '[[=a=]]'", text},
      {"'[[.-.]]'", text},
      {"'[[.hyphen.]]'", text},
      {"-o 'a\\{2\\}\\{3\\}'", text},
      {"'\\(^a\\)'", text},
      {"'x\\|*x'", text},
      {"-E -c '+x'", text},
      {"-E 'x|*x'", text},
      {"-E -o 'a+?'", text},
      {"-A 0 -n a", text},
      {"--group-separator=XX -A1 aab", text},
      {"--no-group-separator -C1 -e '^b$' -e '^-$'", text},
      {"-b alpha", two},
      {"-b -o -n alpha", two},
      {"-z alpha", {"records"}},
      {"-z -c -v alpha", {"records"}},
      {"match", {"binary"}},
      {"-a -n match", {"binary"}},
      {"-c match", {"binary", "text"}},
      {"-f patterns", two},
      {"-f nopatterns", two},
      {"-f patterns -e gamma -n", two},
      {"-v -c ''", two},
      {"-v ''", text},
      {"-r alpha", {"tree/a.c"}},
      {"-r --include='*.c' alpha", {"tree"}, true},
      {"-r --exclude='*.c' alpha", {"tree"}, true},
      // The precedence of several: the last that matches wins; none matching, the first decides.
      {"-r --include='*.c' --exclude='a*' alpha", {"tree"}, true},
      {"-r --exclude='a*' --include='*.c' alpha", {"tree"}, true},
      {"-r --exclude='*.c' --include='c*' alpha", {"tree"}, true},
      {"-r --include='*.h' --include='a*' --exclude='*.h' alpha", {"tree"}, true},
      {"-r --exclude-dir=skip alpha", {"tree"}, true},
      {"--exclude='*.h' alpha", {"tree/b.h", "more"}},
      {"--color=always -v -C1 alphabet", {"more"}},
      {"--color=always -H -n beta", two},
      {"--line-buffered -n a", text},
      {"-f missing-file a", text},
      // -w and -x with patterns that match the empty string, and -w's retry of a shorter match
      // at the same place.
      {"-w ''", {"words"}},
      {"-x ''", {"words"}},
      {"-wo ''", {"words"}},
      {"-wc ''", {"words"}},
      {"-w 'x*'", {"words"}},
      {"-wo 'x*'", {"words"}},
      {"-wn 'y*'", {"words"}},
      {"-xc 'x*'", {"words"}},
      {"-w -E 'x?'", {"words"}},
      {"-wo -E '(ab)?'", {"words"}},
      {"-wo 'a.*b'", {"words"}},
      {"-wo -E 'ab(ab)*'", {"words"}},
      {"-w --color=always 'x*'", {"words"}},
      // -Z (a NUL after file names) and -T (a tab before content, numbers as wide as the file's
      // size + 1 has digits).
      {"-Z -H alpha", two},
      {"-Z -l alpha", two},
      {"-Z -L gamma", two},
      {"-Z -c alpha", two},
      {"-Z -n -A1 alpha", two},
      {"-Z -o -H alpha", two},
      {"-T alpha", two},
      {"-T -n alpha", two},
      {"-T -n -b alpha", two},
      {"-T -c alpha", two},
      {"-TZ -n alpha", two},
      {"-T -C1 -n alpha", two},
      {"-T -o -b alpha", two},
      {"-T -n -v alpha", {"more"}},
      {"-T alpha", {"more"}},
      {"-T -H --color=always -n beta", two},
      // Back-references in BRE and ERE (POSIX's leftmost-longest matches for -o and colours;
      // each pattern's groups its own), and their errors.
      {"'\\(ab\\)\\1'", {"refs"}},
      {"-E '(ab)\\1'", {"refs"}},
      {"-o '\\(a*\\)b\\1'", {"refs"}},
      {"-E -o '(a|ab)(c|bcd)?\\1'", {"refs"}},
      {"-E -o '([a-z]+) \\1'", {"refs"}},
      {"-w -E '([a-z])\\1'", {"refs"}},
      {"-x -E '(ab)\\1'", {"refs"}},
      {"-c -e '\\(z\\)\\1' -e '\\(b\\)\\1'", {"refs"}},
      {"-E -e '(a)(b)\\2' -e '(f)(o)\\2'", {"refs"}},
      {"-i -E '(ab)\\1'", {"refs"}},
      {"--color=always -E '(b)\\1|z+'", {"refs"}},
      {"-E '(a)\\2'", {"refs"}},
      {"'\\(a\\1\\)'", {"refs"}},
      // -i folds ASCII letters only (the C locale), in every matcher.
      {"-i -f p-e-acute", {"latin1"}},
      {"-i -c -f p-range", {"latin1"}},
      {"-i -E -f p-alt", {"latin1"}},
      {"-i -o -f p-class", {"latin1"}},
      {"-i -c '[[:lower:]]'", {"latin1"}},
      {"-i -o '[^a-c]A'", {"latin1"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    Run g = Gnu(c.args, c.files), o = Ours(c.args, c.files);
    if (c.sort) {
      for (Run* r : {&g, &o}) {
        std::vector<std::string> lines = absl::StrSplit(r->out, '\n');
        std::sort(lines.begin(), lines.end());
        r->out = absl::StrJoin(lines, "\n");
      }
    }
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(o.out, g.out);
    if (o.code != 2) {
      EXPECT_EQ(o.err, g.err);
    }
  }
  // $GREP_COLORS: other colours for matches, file names and separators.
  std::string colors = "GREP_COLORS='mt=01;32:fn=34:se=33:ln=36' ";
  Run g, o;
  g.code = RunCommandSplit(
      absl::StrCat("cd ", dir_, " && ", colors, "LC_ALL=C grep --color=always -n alpha text more"),
      &g.out, &g.err);
  o.code = RunCommandSplit(absl::StrCat("cd ", dir_, " && ", colors, "LC_ALL=C ", grep_,
                                        "--color=always -n alpha dfs:/g/text dfs:/g/more"),
                           &o.out, &o.err);
  EXPECT_EQ(o.code, g.code);
  EXPECT_EQ(absl::StrReplaceAll(o.out, {{"dfs:/g/", ""}}), g.out);
}

// A real tree the other tests do not use: Debian's Perl modules, searched recursively.
TEST_P(GrepGoldenTest, RealTreeMatchesGnuGrep) {
  // A reference missing is a failure, not a skip: git (scripts/setup.sh) puts modules there.
  ASSERT_TRUE(fsys::exists("/usr/share/perl5")) << "no /usr/share/perl5: run scripts/setup.sh";
  // The test's own copy: the links in it are the ones put there on purpose (the host's, such as
  // libxml-sax-perl's to /etc, are left out).
  ASSERT_TRUE(testing::CopyRealTree("/usr/share/perl5", dir_ + "/perl5").ok());
  ASSERT_NO_FATAL_FAILURE(Upload(dir_ + "/perl5", "/g/perl5"));
  for (std::string args :
       {"-rn 'sub new'", "-rc '^use strict'", "-rl -i 'debconf'", "-rE -o 'croak|confess'",
        "-rw -e my -e our -m 3", "-r -A1 -B1 -n 'package Debian'", "-rP '\\$self->\\{\\w+\\}'",
        "-rL 'sub '", "-r --include='*.pm' -h 'VERSION ='", "-R -c 'sub new'",
        "-Rl --exclude-dir=Debian 'use strict'"}) {
    SCOPED_TRACE(args);
    Run g, o;
    g.code = RunCommandSplit("cd " + dir_ + " && LC_ALL=C grep " + args + " perl5 | LC_ALL=C sort",
                             &g.out, &g.err);
    o.code = RunCommandSplit("cd " + dir_ + " && LC_ALL=C " + grep_ + args +
                                 " dfs:/g/perl5 | sed 's|dfs:/g/||' | LC_ALL=C sort",
                             &o.out, &o.err);
    EXPECT_EQ(o.code, g.code) << o.err;
    EXPECT_EQ(o.out, g.out);
  }
}

// Symbolic links on the command line, inside paths and met while recursing: -r follows only the
// operands, -R every link (a link back up is GNU's "recursive directory loop" warning), a
// dangling operand is "No such file or directory", a link to a directory without -r "Is a
// directory", a path through a file "Not a directory".
TEST_P(GrepGoldenTest, SymbolicLinksMatchGnuGrep) {
  for (std::string d : {"links/d/sub", "links/e"}) fsys::create_directories(dir_ + "/" + d);
  for (std::string f : {"links/d/f", "links/d/with space", "links/d/sub/g", "links/e/h"}) {
    std::ofstream(dir_ + "/" + f) << "alpha in " << f << "\nbeta\n";
  }
  std::ofstream(dir_ + "/links/d/new\nline") << "alpha in a name with a newline\n";
  fsys::create_symlink("d", dir_ + "/links/link\nwith newline");
  fsys::create_symlink("../f", dir_ + "/links/d/sub/back");
  fsys::create_symlink("../../e", dir_ + "/links/d/sub/to-e");
  ASSERT_TRUE(testing::AddLinks(dir_ + "/links").ok());
  ASSERT_NO_FATAL_FAILURE(Upload(dir_ + "/links", "/g/links"));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"-r alpha", {"links"}},
      {"-R alpha", {"links"}},
      {"-R -n -H beta", {"links/d"}},
      {"-R -l alpha", {"links/dirlink/"}},
      {"-R -c alpha", {"links/link-to-link"}},
      {"-r alpha", {"links/dirlink"}},
      {"-r alpha", {"links/dirlink/"}},
      {"-r -L beta", {"links/d/sub/to-e", "links/dangling"}},
      {"-R --exclude-dir=sub alpha", {"links"}},
      {"-R --exclude-dir=dirlink --include='*h*' alpha", {"links"}},
      {"-rR alpha", {"links/d"}},
      {"alpha", {"links/link to file", "links/dangling", "links/dirlink/f", "links/dirlink"}},
      {"-s alpha", {"links/dangling", "links/dirlink/sub/back"}},
      {"alpha", {"links/link to file/x", "links/d/sub/up/e/h", "links/d/sub/up/d/sub/back"}},
      {"-c alpha", {"links/dirlink", "links/d/f"}},
  };
  for (const auto& [args, operands] : cases) {
    ExpectSameSorted(args, operands);
  }
}

}  // namespace
}  // namespace ardma
