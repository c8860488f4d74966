// ardma-find against GNU find: /usr/include/linux is copied into the DFS in the order GNU find
// walks it (so a directory's creation order is the local readdir order), then both run over a
// table of expressions; stdout and exit status must be equal. Also: time tests, one round trip
// per batch, errors.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "apps/find/find_cli.h"
#include "apps/find/find_format.h"
#include "core/client/invoke.h"
#include "core/testing/run_command.h"
#include "core/testing/test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(find);

namespace ardma::find {
namespace {

using testing::BinDir;
using ::testing::HasSubstr;
using testing::RunCommandSplit;

class FindTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::tie(server_, client_) = ardma::testing::StartSuiteServer(256u << 20);
    ASSERT_NE(client_, nullptr);
    dfs::DfsClient fs(client_, Mode::kActive);
    std::string listing;
    ASSERT_EQ(RunCommandSplit("cd /usr/include && LC_ALL=C find linux", &listing), 0);
    for (absl::string_view line : absl::StrSplit(listing, '\n', absl::SkipEmpty())) {
      std::string rel(line);
      std::string local = "/usr/include/" + rel;
      if (std::filesystem::is_directory(local)) {
        ASSERT_TRUE(fs.Mkdir("/" + rel).ok()) << rel;
      } else {
        std::ifstream in(local, std::ios::binary);
        std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_TRUE(fs.WriteFile("/" + rel, data).ok()) << rel;
      }
    }
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
  }
  static std::string Find() {
    return absl::StrCat(BinDir(), "/ardma-find --server ",
                        testing::ClientAddress(server_->address()));
  }
  static int Ours(const std::string& expr, std::string* out, std::string* err = nullptr) {
    int code = RunCommandSplit(absl::StrCat(Find(), " dfs:/linux ", expr), out, err);
    *out = absl::StrReplaceAll(*out, {{"dfs:/", ""}});
    return code;
  }
  static int Theirs(const std::string& expr, std::string* out) {
    return RunCommandSplit("cd /usr/include && LC_ALL=C find linux " + expr, out);
  }

  static ardma::testing::TestServer* server_;
  static Client* client_;
};

ardma::testing::TestServer* FindTest::server_ = nullptr;
Client* FindTest::client_ = nullptr;

TEST_F(FindTest, OutputMatchesGnuFindOverATableOfExpressions) {
  const std::vector<std::string> expressions = {
      "",
      "-name '*.h'",
      "-iname '*IOCTL*'",
      "-path '*/usb/*'",
      "-type d",
      "-type f -size +8k",
      "-type f -size -2",
      "-type f -size 1k",
      "-type f -size +1000c -size -2000c",
      "-maxdepth 1",
      "-mindepth 2 -maxdepth 2",
      "-empty",
      "! -name '*.h'",
      "-not -type f",
      "\\( -name 'a*' -o -name 'b*' \\) -type f",
      "-name '*.h' -print0",
      "-type d -print -o -name '*x*'",
      "-false",
      "-name '*.h' -a -size -1k",
      "-type f -name 'if_*' -o -type d -name 'n*'",
  };
  for (const std::string& e : expressions) {
    std::string mine, theirs;
    int my_code = Ours(e, &mine), their_code = Theirs(e, &theirs);
    EXPECT_EQ(my_code, their_code) << e;
    EXPECT_TRUE(mine == theirs) << e << "\n--- ours:\n"
                                << mine.substr(0, 1500) << "\n--- GNU:\n"
                                << theirs.substr(0, 1500);
    if (HasFailure()) return;
  }
}

TEST_F(FindTest, TimeTests) {
  dfs::DfsClient fs(client_, Mode::kActive);
  ASSERT_TRUE(fs.Mkdir("/times").ok());
  ASSERT_TRUE(fs.WriteFile("/times/old", "x").ok());
  absl::SleepFor(absl::Milliseconds(20));  // under test: two modification times apart
  ASSERT_TRUE(fs.WriteFile("/times/new", "y").ok());
  std::string out;
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/times -type f -mmin -60", &out), 0);
  EXPECT_EQ(out, "dfs:/times/old\ndfs:/times/new\n");
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/times -mtime +1", &out), 0);
  EXPECT_EQ(out, "");
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/times -mtime 0 -type f", &out), 0);
  EXPECT_EQ(out, "dfs:/times/old\ndfs:/times/new\n");
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/times -newer dfs:/times/old", &out), 0);
  EXPECT_EQ(out, "dfs:/times\ndfs:/times/new\n");
}

TEST_F(FindTest, OneRoundTripPerBatch) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::find()).ok());
  auto expr = std::make_unique<Expr>();
  expr->op = Op::kName;
  expr->text = "*.h";
  Request req;
  req.fs = "default";
  req.root = "/linux";
  req.display = "dfs:/linux";
  req.expr = EncodeExpr(*expr);
  req.now = absl::Now();
  req.max_entries = 100;
  uint64_t before = client_->counters().round_trips;
  int batches = 0;
  size_t matches = 0;
  for (;;) {
    absl::StatusOr<std::string> reply =
        Invoke(*client_, Mode::kActive, active_libraries::find(), "find.scan", EncodeRequest(req));
    ASSERT_TRUE(reply.ok()) << reply.status();
    absl::StatusOr<Batch> batch = DecodeBatch(*reply);
    ASSERT_TRUE(batch.ok());
    ++batches;
    matches += batch->matches.size();
    if (batch->done) break;
    req.cursor = batch->next;
  }
  std::string theirs;
  ASSERT_EQ(RunCommandSplit("cd /usr/include && LC_ALL=C find linux | wc -l", &theirs), 0);
  size_t entries = std::stoul(theirs);
  EXPECT_EQ(batches, static_cast<int>((entries + 99) / 100));
  EXPECT_EQ(client_->counters().round_trips - before, static_cast<uint64_t>(batches));
  std::string names;
  ASSERT_EQ(RunCommandSplit("cd /usr/include && LC_ALL=C find linux -name '*.h' | wc -l", &names),
            0);
  EXPECT_EQ(matches, std::stoul(names));
}

TEST_F(FindTest, ErrorsAndRdmaMode) {
  std::string out, err;
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/nope", &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("'dfs:/nope': No such file or directory"));
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/linux -frob", &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("unknown predicate `-frob'"));
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/linux -type x", &out, &err), 1);
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/linux -name", &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("missing argument to `-name'"));
  EXPECT_EQ(RunCommandSplit(Find() + " /usr/include", &out, &err), 1);
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/nope dfs:/linux -maxdepth 0", &out, &err), 1);
  EXPECT_EQ(out, "dfs:/linux\n");  // goes on with the next starting point
  std::string active, rdma;
  EXPECT_EQ(RunCommandSplit(Find() + " dfs:/linux -name '*.h' -size -2", &active), 0);
  EXPECT_EQ(RunCommandSplit(Find() + " --mode=rdma dfs:/linux -name '*.h' -size -2", &rdma), 0);
  EXPECT_EQ(active, rdma);
  EXPECT_EQ(RunCommandSplit(BinDir() + "/ardma-find --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("-maxdepth"));
}

// The command-line library the binary is a thin main over.
absl::StatusOr<Command> ParseArgs(std::vector<std::string> args) {
  return testing::ParseArgv("ardma-find", std::move(args), ParseCommandLine);
}

TEST(FindCommandLineTest, SplitsOptionsStartingPointsAndExpression) {
  absl::StatusOr<Command> c =
      ParseArgs({"--fs=t", "--mode", "rdma", "dfs:/a", "dfs:/b", "-name", "*.h", "-print"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fs, "t");
  EXPECT_EQ(c->mode, Mode::kRdma);
  EXPECT_EQ(c->roots, (std::vector<std::string>{"dfs:/a", "dfs:/b"}));
  EXPECT_EQ(c->expression, (std::vector<std::string>{"-name", "*.h", "-print"}));
  EXPECT_EQ(ParseArgs({"-name", "x"}).status().message(),
            "no dfs:/PATH starting point (see --help)");
  // An unknown option is an unknown predicate, as GNU find says it.
  EXPECT_EQ(ParseArgs({"--bogus"}).status().message(), "unknown predicate `--bogus'");
  EXPECT_EQ(ParseArgs({"-bogus", "dfs:/"}).status().message(), "unknown predicate `-bogus'");
  EXPECT_EQ(ParseArgs({"--server"}).status().message(), "--server needs HOST:PORT");
  EXPECT_TRUE(ParseArgs({"--help"})->help);
  EXPECT_TRUE(ParseArgs({"--version"})->version);
}

// A bad expression is a usage error found before any server is contacted (none listens here).
TEST(FindCommandLineTest, ABadExpressionIsReportedBeforeConnecting) {
  absl::StatusOr<Command> c = ParseArgs({"--server=127.0.0.1:1", "dfs:/", "-bogus"});
  ASSERT_TRUE(c.ok()) << c.status();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunCommand(*c), 1);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, ::testing::HasSubstr("unknown predicate `-bogus'"));
  EXPECT_THAT(err, ::testing::Not(::testing::HasSubstr("unreachable")));
}

TEST(FindCommandLineTest, ParsesExpressionsWithFindsPrecedence) {
  // a -o b c  ==  a -o (b -a c)
  absl::StatusOr<Expression> e =
      ParseExpression({"-name", "a", "-o", "-type", "d", "-empty", "-maxdepth", "2"}, nullptr);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->expr->op, Op::kOr);
  ASSERT_EQ(e->expr->kids.size(), 2u);
  EXPECT_EQ(e->expr->kids[0]->op, Op::kName);
  EXPECT_EQ(e->expr->kids[1]->op, Op::kAnd);
  EXPECT_FALSE(e->has_action);
  EXPECT_EQ(e->max_depth, 2u);
  EXPECT_EQ(ParseExpression({"-bogus"}, nullptr).status().message(), "unknown predicate `-bogus'");
  EXPECT_EQ(ParseExpression({"-name", "a", ")"}, nullptr).status().message(), "unexpected ')'");
}

}  // namespace
}  // namespace ardma::find
