#include "core/cli/flag_set.h"

#include <fstream>

#include "core/cli/client_flags.h"
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
  EXPECT_EQ(flags.Parse({"--bogus=1"}).status().message(), "unrecognized option '--bogus=1'");
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
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(bad.ParseForMain(2, bad_ptrs.data(), &args), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "t: unrecognized option '--bogus'\nTry 't --help' for more information.\n");

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

// argv for ParseGnu: the program's name, then `args`.
struct Argv {
  explicit Argv(std::vector<std::string> args) : strings(std::move(args)) {
    strings.insert(strings.begin(), "prog");
    for (std::string& a : strings) pointers.push_back(a.data());
    pointers.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(strings.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
};

// A grep-like table: switches, a repeatable option with an argument, an optional argument.
struct GnuTool {
  GnuTool() : flags("prog", "Usage: prog [OPTION]... PATTERNS [FILE]...") {
    using Arg = FlagSet::Argument;
    flags.Section("Matching:");
    flags.Option("regexp", 'e', Arg::kRequired, "PATTERNS", "use PATTERNS",
                 [this](std::optional<std::string_view> v) {
                   events.push_back("e:" + std::string(*v));
                   return absl::OkStatus();
                 });
    flags.Option("count", 'c', Arg::kNone, "", "print only a count",
                 [this](std::optional<std::string_view> v) {
                   events.push_back(v.has_value() ? "c=?" : "c");
                   return absl::OkStatus();
                 });
    flags.Option("color", 0, Arg::kOptional, "WHEN",
                 "highlight: never, always or auto\nsecond line",
                 [this](std::optional<std::string_view> v) -> absl::Status {
                   if (v.has_value() && *v != "always" && *v != "never") {
                     return absl::InvalidArgumentError("invalid argument for '--color'");
                   }
                   events.push_back("color:" + std::string(v.value_or("auto")));
                   return absl::OkStatus();
                 });
    flags.Alias("colour", "color");
    flags.Bool("quiet", &quiet, "print nothing");
    flags.Short('q', "quiet");
    flags.Short('Q', "quiet");
    flags.Short('V', "version");
  }
  absl::StatusOr<std::vector<std::string>> Parse(std::vector<std::string> args) {
    events.clear();
    Argv argv(std::move(args));
    return flags.ParseGnu(argv.argc(), argv.argv());
  }
  FlagSet flags;
  std::vector<std::string> events;
  bool quiet = false;
};

TEST(FlagSetGnuTest, ParsesAsGetoptLongDoes) {
  GnuTool t;
  absl::StatusOr<std::vector<std::string>> operands =
      t.Parse({"f1", "-cqePAT", "--regex", "two", "f2", "--col=always", "-e", "-x", "--colour",
               "--", "-c"});
  ASSERT_TRUE(operands.ok()) << operands.status();
  EXPECT_THAT(*operands, ElementsAre("f1", "f2", "-c"));  // in order, "--" ends the options
  EXPECT_THAT(t.events, ElementsAre("c", "e:PAT", "e:two", "color:always", "e:-x", "color:auto"));
  EXPECT_TRUE(t.quiet);
  EXPECT_FALSE(t.flags.help_requested());
}

TEST(FlagSetGnuTest, ErrorsAreGetoptsMessages) {
  GnuTool t;
  EXPECT_EQ(t.Parse({"-z"}).status().message(), "invalid option -- 'z'");
  EXPECT_EQ(t.Parse({"-cz"}).status().message(), "invalid option -- 'z'");
  EXPECT_EQ(t.Parse({"--count", "-z"}).status().message(), "invalid option -- 'z'");
  EXPECT_EQ(t.Parse({"--bogus=1", "x"}).status().message(), "unrecognized option '--bogus=1'");
  EXPECT_EQ(t.Parse({"x", "-e"}).status().message(), "option requires an argument -- 'e'");
  EXPECT_EQ(t.Parse({"x", "--regexp"}).status().message(),
            "option '--regexp' requires an argument");
  EXPECT_EQ(t.Parse({"--count=3"}).status().message(),
            "option '--count' doesn't allow an argument");
  EXPECT_EQ(t.Parse({"--co", "x"}).status().message(),
            "option '--co' is ambiguous; possibilities: '--count' '--color' '--colour'");
  EXPECT_EQ(t.Parse({"--color=sometimes"}).status().message(), "invalid argument for '--color'");
  EXPECT_FALSE(t.Parse({"--quiet=yes"}).ok());  // a switch in GNU style
}

TEST(FlagSetGnuTest, HelpAndVersionStopTheParse) {
  GnuTool help;
  absl::StatusOr<std::vector<std::string>> operands = help.Parse({"--he", "--bogus"});
  ASSERT_TRUE(operands.ok()) << operands.status();
  EXPECT_TRUE(help.flags.help_requested());
  GnuTool version;
  ASSERT_TRUE(version.Parse({"x", "-V", "-z"}).ok());
  EXPECT_TRUE(version.flags.version_requested());
}

TEST(FlagSetGnuTest, HelpListsOptionsAsGnuToolsDo) {
  GnuTool t;
  std::string help = t.flags.GnuHelp("Exit status: 0.");
  EXPECT_THAT(help, HasSubstr("Usage: prog [OPTION]... PATTERNS [FILE]...\nMatching:\n"));
  EXPECT_THAT(help, HasSubstr("\n  -e, --regexp=PATTERNS       use PATTERNS\n"));
  EXPECT_THAT(help, HasSubstr("\n      --color, --colour[=WHEN]  highlight: never, always or auto\n"
                              "                              second line\n"));
  EXPECT_THAT(help, HasSubstr("\n  -q, -Q, --quiet             print nothing\n"));
  EXPECT_THAT(help, HasSubstr("\n  -V, --version               print the version and commit\n"));
  EXPECT_THAT(help, HasSubstr("\n\nExit status: 0.\n"));
}

TEST(ClientFlagsTest, DeclaresTheSharedFlagsAndMakesClientOptions) {
  FlagSet flags("t", "usage");
  DfsFlags dfs;
  dfs.Declare(flags);
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse({"--server=unix:/s", "--fs", "x", "--mode=rdma", "--tls-ca", "ca.pem",
                   "--tls-cert=c.pem", "--tls-key=k.pem", "op"});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_THAT(*rest, ElementsAre("op"));
  EXPECT_EQ(dfs.server, "unix:/s");
  EXPECT_EQ(dfs.fs, "x");
  EXPECT_EQ(dfs.mode, Mode::kRdma);
  absl::StatusOr<ClientOptions> options = dfs.ConnectOptions();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->tls.ca_file, "ca.pem");
  EXPECT_EQ(options->tls.cert_file, "c.pem");
  EXPECT_EQ(options->tls.key_file, "k.pem");
  EXPECT_THAT(flags.Parse({"--mode=fast"}).status().message(), HasSubstr("unknown mode 'fast'"));
  EXPECT_EQ(flags.Parse({"--server"}).status().message(), "--server needs HOST:PORT");
  EXPECT_THAT(flags.Help(), HasSubstr("--auth-file FILE"));

  dfs.auth_file = ::testing::TempDir() + "/no-such-auth-file";
  EXPECT_THAT(dfs.ConnectOptions().status().message(), HasSubstr("--auth-file"));
  EXPECT_THAT(dfs.Export().message(), HasSubstr("--auth-file"));
}

}  // namespace
}  // namespace ardma
