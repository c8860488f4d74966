// ardma-grep against GNU grep: /usr/include/*.h is copied into the DFS and both greps run over a
// table of flags and patterns; stdout and exit status must be byte-for-byte equal. Also: results
// far larger than a batch, round trips per batch, errors, RDMA mode.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "apps/grep/grep_cli.h"
#include "apps/grep/grep_format.h"
#include "core/client/invoke.h"
#include "core/testing/run_command.h"
#include "core/testing/test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(grep);

namespace ardma::grep {
namespace {

using testing::BinDir;
using ::testing::HasSubstr;
using testing::RunCommandSplit;

// Runs a command, returning its exit status and its stdout only (stderr to `err`).

class GrepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::tie(server_, client_) = ardma::testing::StartSuiteServer(256u << 20);
    ASSERT_NE(client_, nullptr);
    dfs::DfsClient fs(client_, Mode::kActive);
    ASSERT_TRUE(fs.Mkdir("/inc").ok());
    files_ = new std::vector<std::string>;
    for (const auto& e : std::filesystem::directory_iterator("/usr/include")) {
      if (!e.is_regular_file() || e.path().extension() != ".h") continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::string name = e.path().filename().string();
      ASSERT_TRUE(fs.WriteFile("/inc/" + name, data).ok()) << name;
      files_->push_back(name);
    }
    std::sort(files_->begin(), files_->end());
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
    delete files_;
  }

  // ardma-grep's output over the copies, with "dfs:/inc/" stripped from file names.
  static int Ours(const std::string& flags, const std::vector<std::string>& files, std::string* out,
                  std::string* err = nullptr) {
    std::string operands;
    for (const std::string& f : files) absl::StrAppend(&operands, " dfs:/inc/", f);
    int code = RunCommandSplit(
        absl::StrCat(BinDir(), "/ardma-grep --server ", testing::ClientAddress(server_->address()),
                     " ", flags, operands),
        out, err);
    *out = absl::StrReplaceAll(*out, {{"dfs:/inc/", ""}});
    return code;
  }
  static int Theirs(const std::string& flags, const std::vector<std::string>& files,
                    std::string* out) {
    return RunCommandSplit(
        absl::StrCat("cd /usr/include && LC_ALL=C grep ", flags, " ", absl::StrJoin(files, " ")),
        out);
  }

  static ardma::testing::TestServer* server_;
  static Client* client_;
  static std::vector<std::string>* files_;
};

ardma::testing::TestServer* GrepTest::server_ = nullptr;
Client* GrepTest::client_ = nullptr;
std::vector<std::string>* GrepTest::files_ = nullptr;

TEST_F(GrepTest, OutputMatchesGnuGrepOverATableOfFlags) {
  ASSERT_GT(files_->size(), 50u);
  const std::vector<std::string> patterns = {"size_t",
                                             "'^#include'",
                                             "'int\\|char'",
                                             "'struct.*{'",
                                             "'[[:digit:]]\\{3\\}'",
                                             "'^$'",
                                             "-E '(un)?signed (int|long)'",
                                             "-F 'a.b'",
                                             "-e errno -e EOF",
                                             "'x'"};
  const std::vector<std::string> flags = {"",
                                          "-n",
                                          "-i",
                                          "-v -c",
                                          "-c",
                                          "-l",
                                          "-L",
                                          "-o",
                                          "-w",
                                          "-x",
                                          "-n -A2",
                                          "-B3 -n",
                                          "-C1",
                                          "-m2",
                                          "-m1 -A2 -n",
                                          "-o -n -i",
                                          "-h -n",
                                          "-w -o",
                                          "--color=always -n",
                                          "--color=always -o -H",
                                          "-c -m3",
                                          "-q"};
  std::vector<std::string> some(files_->begin(), files_->begin() + 40);
  int compared = 0;
  for (const std::string& p : patterns) {
    for (const std::string& f : flags) {
      std::string mine, theirs;
      int my_code = Ours(f + " " + p, some, &mine);
      int their_code = Theirs(f + " " + p, some, &theirs);
      EXPECT_EQ(my_code, their_code) << "flags: " << f << " pattern: " << p;
      EXPECT_TRUE(mine == theirs) << "flags: " << f << " pattern: " << p << "\n--- ours:\n"
                                  << mine.substr(0, 2000) << "\n--- GNU:\n"
                                  << theirs.substr(0, 2000);
      ++compared;
      if (HasFailure()) return;
    }
  }
  // All the files at once, one file, and a single file without a prefix.
  for (const char* f : {"-n size_t", "-c define", "-l '[0-9]\\{4\\}'"}) {
    std::string mine, theirs;
    EXPECT_EQ(Ours(f, *files_, &mine), Theirs(f, *files_, &theirs)) << f;
    EXPECT_TRUE(mine == theirs) << f;
  }
  std::string mine, theirs;
  EXPECT_EQ(Ours("-n define", {"stdio.h"}, &mine), Theirs("-n define", {"stdio.h"}, &theirs));
  EXPECT_EQ(mine, theirs);
  EXPECT_GT(compared, 200);
}

TEST_F(GrepTest, RdmaModeGivesTheSameOutput) {
  std::vector<std::string> some(files_->begin(), files_->begin() + 10);
  for (std::string f : {"-n -C2 size_t", "-c -i int", "-o -w 'char'"}) {
    std::string active, rdma;
    EXPECT_EQ(Ours(f, some, &active), Ours("--mode=rdma " + f, some, &rdma)) << f;
    EXPECT_EQ(active, rdma) << f;
  }
}

TEST_F(GrepTest, ResultsLargerThanABatchArriveCompleteAndInOrderOneRoundTripPerBatch) {
  dfs::DfsClient fs(client_, Mode::kActive);
  std::string big;
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&big, "line ", i, " matches\n");
  ASSERT_TRUE(fs.WriteFile("/big.txt", big).ok());
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::grep()).ok());
  Request req;
  req.fs = "default";
  req.files = {"/big.txt"};
  req.options.patterns = {"matches"};
  req.max_records = 4096;
  uint64_t before = client_->counters().round_trips;
  int batches = 0;
  uint64_t expect = 1;
  while (!req.cursor.done) {
    absl::StatusOr<std::string> reply =
        Invoke(*client_, Mode::kActive, active_libraries::grep(), "grep.scan", EncodeRequest(req));
    ASSERT_TRUE(reply.ok()) << reply.status();
    absl::StatusOr<Batch> batch = DecodeBatch(*reply);
    ASSERT_TRUE(batch.ok());
    ++batches;
    for (const Record& r : batch->records) {
      ASSERT_EQ(r.kind, RecordKind::kSelected);
      ASSERT_EQ(r.line, expect);
      ASSERT_EQ(r.text, absl::StrCat("line ", expect - 1, " matches"));
      ++expect;
    }
    req.cursor = batch->next;
  }
  EXPECT_EQ(expect - 1, 100000u);
  EXPECT_EQ(batches, (100000 + 4095) / 4096);
  EXPECT_EQ(client_->counters().round_trips - before, static_cast<uint64_t>(batches));
  // Through the command line: every line, in order.
  std::string out;
  EXPECT_EQ(RunCommandSplit(absl::StrCat(BinDir(), "/ardma-grep --server ",
                                         testing::ClientAddress(server_->address()),
                                         " -c matches dfs:/big.txt"),
                            &out),
            0);
  EXPECT_EQ(out, "100000\n");
  EXPECT_EQ(RunCommandSplit(absl::StrCat(BinDir(), "/ardma-grep --server ",
                                         testing::ClientAddress(server_->address()),
                                         " -n matches dfs:/big.txt | tail -1"),
                            &out),
            0);
  EXPECT_EQ(out, "100000:line 99999 matches\n");
}

TEST_F(GrepTest, ErrorsAndExitStatusesAreGrepsOwn) {
  std::string out, err;
  std::string grep = absl::StrCat(BinDir(), "/ardma-grep --server ",
                                  testing::ClientAddress(server_->address()), " ");
  EXPECT_EQ(RunCommandSplit(grep + "'a\\(' dfs:/inc/stdio.h", &out, &err), 2);  // bad pattern
  EXPECT_FALSE(err.empty());
  EXPECT_EQ(RunCommandSplit(grep + "'\\(a\\)\\2' dfs:/inc/stdio.h", &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("Invalid back reference"));
  EXPECT_EQ(RunCommandSplit(grep + "printf dfs:/nope dfs:/inc/stdio.h", &out, &err),
            2);  // still searches
  EXPECT_THAT(err, HasSubstr("dfs:/nope: No such file or directory"));
  EXPECT_THAT(out, HasSubstr("printf"));
  EXPECT_EQ(RunCommandSplit(grep + "-s printf dfs:/nope", &out, &err), 2);
  EXPECT_EQ(err, "");
  EXPECT_EQ(RunCommandSplit(grep + "-q printf dfs:/nope dfs:/inc/stdio.h", &out, &err),
            0);  // -q matched
  EXPECT_EQ(RunCommandSplit(grep + "no-such-text-anywhere dfs:/inc/stdio.h", &out), 1);
  EXPECT_EQ(RunCommandSplit(grep + "printf dfs:/inc", &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("Is a directory"));
  EXPECT_EQ(RunCommandSplit(grep + "-r -l printf dfs:/inc", &out), 0);
  EXPECT_THAT(out, HasSubstr("dfs:/inc/stdio.h\n"));
  EXPECT_EQ(RunCommandSplit(grep + "printf /usr/include/stdio.h", &out, &err),
            2);  // not a dfs: path
  EXPECT_EQ(RunCommandSplit(grep + "--frobnicate x dfs:/inc/stdio.h", &out, &err), 2);
  EXPECT_EQ(RunCommandSplit(grep + "-m 0 printf dfs:/inc/stdio.h", &out), 1);
  EXPECT_EQ(RunCommandSplit(BinDir() + "/ardma-grep --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("--only-matching"));
}

// The command-line library the binary is a thin main over.
absl::StatusOr<Command> Parse(std::vector<std::string> args) {
  return testing::ParseArgv("ardma-grep", std::move(args), ParseCommandLine);
}

TEST(GrepCommandLineTest, ParsesGnuOptions) {
  absl::StatusOr<Command> c = Parse({"-c", "-n", "-i", "-e", "a.c", "-e", "b", "dfs:/x", "dfs:/y"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options.report, Report::kCount);
  EXPECT_TRUE(c->line_numbers);
  EXPECT_TRUE(c->options.ignore_case);
  EXPECT_EQ(c->options.patterns, (std::vector<std::string>{"a.c", "b"}));
  EXPECT_EQ(c->operands, (std::vector<std::string>{"dfs:/x", "dfs:/y"}));
  // The first operand is the pattern when no -e is given; -C sets both contexts; -q wins over -l.
  c = Parse({"-C", "2", "-q", "-l", "pat", "dfs:/z"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options.patterns, std::vector<std::string>{"pat"});
  EXPECT_EQ(c->options.report, Report::kQuiet);
  EXPECT_TRUE(c->quiet);
  EXPECT_EQ(c->operands, std::vector<std::string>{"dfs:/z"});
  c = Parse({"-m", "0", "p", "dfs:/z"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->max_zero);
  c = Parse({"--help"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->help);
}

TEST(GrepCommandLineTest, UsageErrorsSayWhatGnuGrepSays) {
  EXPECT_EQ(Parse({"-A", "x", "p", "dfs:/f"}).status().message(),
            "x: invalid context length argument");
  EXPECT_EQ(Parse({"--color=sometimes", "p"}).status().message(),
            "invalid argument 'sometimes' for '--color'");
  EXPECT_EQ(Parse({"-j", "p"}).status().message(), "invalid option -- 'j'");
  EXPECT_EQ(Parse({}).status().message(), "no PATTERNS given");
  EXPECT_EQ(Parse({"--mode=fast", "p"}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ardma::grep
