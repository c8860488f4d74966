#include "core/cli/flag_set.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FlagSetTest, ParsesAllKindsAndSpellings) {
  FlagSet flags("t", "usage");
  std::string file;
  int64_t n = 1;
  bool b = false, c = true;
  uint64_t size = 0;
  absl::Duration d = absl::Seconds(1);
  flags.String("memory-file", &file, "PATH", "file");
  flags.Int("workers", &n, "N", "workers");
  flags.Bool("quiet", &b, "quiet");
  flags.Bool("color", &c, "color");
  flags.Bytes("memory", &size, "size");
  flags.Duration("deadline", &d, "deadline");
  absl::StatusOr<std::vector<std::string>> args =
      flags.Parse({"pos1", "--memory-file", "/dev/shm/x", "--workers=4", "--quiet", "--no-color",
                   "--memory=2G", "--deadline", "250ms", "--", "--not-a-flag"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ElementsAre("pos1", "--not-a-flag"));
  EXPECT_EQ(file, "/dev/shm/x");
  EXPECT_EQ(n, 4);
  EXPECT_TRUE(b);
  EXPECT_FALSE(c);
  EXPECT_EQ(size, 2ull << 30);
  EXPECT_EQ(d, absl::Milliseconds(250));
}

TEST(FlagSetTest, ErrorsNameTheFlag) {
  FlagSet flags("t", "usage");
  int64_t n = 0;
  uint64_t size = 0;
  flags.Int("workers", &n, "N", "workers");
  flags.Bytes("memory", &size, "size");
  EXPECT_THAT(flags.Parse({"--bogus"}).status().message(), HasSubstr("--bogus"));
  EXPECT_THAT(flags.Parse({"--workers=x"}).status().message(), HasSubstr("--workers"));
  EXPECT_THAT(flags.Parse({"--workers"}).status().message(), HasSubstr("needs a value"));
  EXPECT_FALSE(flags.Parse({"--memory=12Q"}).ok());
}

TEST(FlagSetTest, HelpListsFlagsAndStopAtPositionalLeavesSubcommandArgs) {
  FlagSet flags("t", "Usage: t");
  std::string server = "127.0.0.1:15712";
  flags.String("server", &server, "HOST:PORT", "where");
  absl::StatusOr<std::vector<std::string>> args =
      flags.Parse({"--help", "read", "--raw", "0", "8"}, /*stop_at_positional=*/true);
  ASSERT_TRUE(args.ok());
  EXPECT_TRUE(flags.help_requested());
  EXPECT_THAT(*args, ElementsAre("read", "--raw", "0", "8"));
  EXPECT_THAT(flags.Help(), HasSubstr("--server HOST:PORT"));
  EXPECT_THAT(flags.Help(), HasSubstr("127.0.0.1:15712"));
}

TEST(FlagSetTest, ShortNamesTakeValuesAttachedOrSeparate) {
  FlagSet flags("t", "usage");
  std::string tests;
  int64_t clients = 0;
  bool quiet = false;
  flags.String("tests", &tests, "LIST", "which");
  flags.Int("clients", &clients, "N", "how many");
  flags.Bool("quiet", &quiet, "less output");
  flags.Short('t', "tests");
  flags.Short('c', "clients");
  flags.Short('q', "quiet");
  absl::StatusOr<std::vector<std::string>> args =
      flags.Parse({"-t", "dht.get,dht.put", "-c50", "-q", "-x", "rest"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(tests, "dht.get,dht.put");
  EXPECT_EQ(clients, 50);
  EXPECT_TRUE(quiet);
  EXPECT_THAT(*args, ElementsAre("-x", "rest"));  // not a short flag: positional, as before
  EXPECT_THAT(flags.Parse({"-c"}).status().message(), HasSubstr("-c needs a value"));
  EXPECT_THAT(flags.Parse({"-cmany"}).status().message(), HasSubstr("-c=many"));
  EXPECT_THAT(flags.Parse({"-qq"}).status().message(), HasSubstr("takes no value"));
  EXPECT_THAT(flags.Help(), HasSubstr("-c, --clients N"));
}

TEST(FlagSetTest, ParseForMainGivesExitCodesForBadFlagsAndHelp) {
  std::string server;
  std::vector<std::string> args;
  FlagSet bad("t", "usage");
  bad.String("server", &server, "HOST:PORT", "where");
  std::vector<std::string> bad_argv = {"t", "--bogus"};
  std::vector<char*> bad_ptrs;
  for (auto& a : bad_argv) bad_ptrs.push_back(a.data());
  EXPECT_EQ(bad.ParseForMain(2, bad_ptrs.data(), &args), 2);

  FlagSet help("t", "usage");
  std::vector<std::string> help_argv = {"t", "--help"};
  std::vector<char*> help_ptrs;
  for (auto& a : help_argv) help_ptrs.push_back(a.data());
  EXPECT_EQ(help.ParseForMain(2, help_ptrs.data(), &args), 0);

  FlagSet ok("t", "usage");
  ok.String("server", &server, "HOST:PORT", "where");
  std::vector<std::string> ok_argv = {"t", "--server", "h:1", "cmd"};
  std::vector<char*> ok_ptrs;
  for (auto& a : ok_argv) ok_ptrs.push_back(a.data());
  EXPECT_EQ(ok.ParseForMain(4, ok_ptrs.data(), &args), std::nullopt);
  EXPECT_THAT(args, ElementsAre("cmd"));
  EXPECT_EQ(server, "h:1");
}

TEST(FlagSetTest, ConfigFileLinesBecomeFlags) {
  absl::StatusOr<std::vector<std::string>> args = FlagSet::ConfigFileArgs(
      "# ardmad.conf\n\nlisten 127.0.0.1:1\n--memory=64M  # heap\nquiet\n  workers = 4\n", "f");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::vector<std::string>{"--listen=127.0.0.1:1", "--memory=64M", "--quiet",
                                             "--workers=4"}));
  EXPECT_EQ(FlagSet::ConfigFileArgs("listen x\n-x\n", "f").status().message(),
            "f:2: expected a flag, as 'name value'");
}

TEST(FlagSetTest, ConfigFileFlagsComeBeforeTheCommandLine) {
  std::string path = ::testing::TempDir() + "/flags.conf";
  std::ofstream(path) << "server 10.0.0.1:1\nclients 3\n";
  FlagSet flags("t", "usage");
  flags.ConfigFileFlag();
  std::string server;
  int64_t clients = 0;
  flags.String("server", &server, "HOST:PORT", "");
  flags.Int("clients", &clients, "N", "");
  std::string config = "--config=" + path;
  std::vector<std::string> argv_s = {"t", "--clients", "5", config};
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  std::vector<std::string> positional;
  EXPECT_EQ(flags.ParseForMain(static_cast<int>(argv.size()), argv.data(), &positional),
            std::nullopt);
  EXPECT_EQ(server, "10.0.0.1:1");  // from the file
  EXPECT_EQ(clients, 5);            // the command line wins
  EXPECT_THAT(flags.Help(), ::testing::HasSubstr("--config FILE"));
}

}  // namespace
}  // namespace ardma

namespace ardma {
namespace {

TEST(LongOptionTest, NamesAndValuesInBothGnuForms) {
  EXPECT_TRUE(IsLongOption("--fs", "--fs"));
  EXPECT_TRUE(IsLongOption("--fs=x", "--fs"));
  EXPECT_FALSE(IsLongOption("--fsck", "--fs"));
  EXPECT_FALSE(IsLongOption("--f", "--fs"));
  std::vector<std::string> args = {"prog", "--fs=a", "--fs", "b", "--fs"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int i = 1;
  EXPECT_EQ(*LongOptionValue(5, argv.data(), i, "--fs"), "a");
  EXPECT_EQ(i, 1);
  i = 2;
  EXPECT_EQ(*LongOptionValue(5, argv.data(), i, "--fs"), "b");
  EXPECT_EQ(i, 3);
  i = 4;
  EXPECT_EQ(LongOptionValue(5, argv.data(), i, "--fs").status().message(),
            "option '--fs' requires an argument");
}

}  // namespace
}  // namespace ardma
