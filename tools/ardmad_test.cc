// Tests of the ardmad and ardma binaries as a user runs them: flags, exit codes, and data in a
// --memory-file surviving a SIGKILL.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/testing/raw_socket.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "core/wire/messages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace ardma {
namespace {

using testing::ResidentBytes;

using testing::BinDir;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;

using testing::TempPath;
using Daemon = testing::ServerProcess;

TEST(ArdmadTest, DataInAMemoryFileSurvivesSigkill) {
  std::string heap_file = TempPath("ardma_heap");
  std::filesystem::remove(heap_file);
  uint64_t addr = 0;
  {
    Daemon d({"--memory", "16M", "--memory-file", heap_file});
    ASSERT_FALSE(d.address().empty()) << "ardmad did not start";
    auto client = Client::Connect(d.address());
    ASSERT_TRUE(client.ok()) << client.status();
    RemoteContext ctx(client->get(), {});
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, 128);
    ASSERT_TRUE(block.ok()) << block.status();
    addr = *block;
    ASSERT_TRUE((*client)->Write(addr, "acknowledged before the crash").ok());
    ASSERT_TRUE((*client)->FetchAdd(addr + 64, 41).ok());
    d.Kill(SIGKILL);
  }
  {
    Daemon d({"--memory-file", heap_file});  // size taken from the file
    ASSERT_FALSE(d.address().empty()) << "ardmad did not restart";
    auto client = Client::Connect(d.address());
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(*(*client)->Read(addr, 29), "acknowledged before the crash");
    EXPECT_EQ(*(*client)->FetchAdd(addr + 64, 1), 41u);
    EXPECT_EQ(WEXITSTATUS(d.Kill(SIGTERM)), 0);  // graceful stop exits 0
  }
  std::filesystem::remove(heap_file);
}

// CPU ticks (user + system) process `pid` has used.
long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stol(f);
    if (i == 15) stime = std::stol(f);
  }
  return utime + stime;
}

// Out of file descriptors, ardmad neither spins nor floods its log while connections wait, serves
// the connections it has, and serves the waiting ones once descriptors are free again (issue 22:
// at the limit, new connections hung and the accept loop spun writing ~250k log lines a second).
// 2,000 idle connections against the common default of 1,024 descriptors.
TEST(ArdmadTest, OutOfDescriptorsItBacksOffQuietlyAndRecovers) {
  constexpr int kLimit = 1024, kConnections = 2000;
  rlimit own{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_max < kConnections + 100) {
    GTEST_SKIP() << "this test needs " << kConnections + 100 << " descriptors; the hard limit is "
                 << own.rlim_max;
  }
  rlimit raised{own.rlim_max, own.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &raised), 0);
  std::string log = TempPath("emfile.log"), port = TempPath("emfile.port"),
              pid_file = TempPath("emfile.pid");
  std::filesystem::remove(port);
  std::string out;
  ASSERT_EQ(
      RunCommand(absl::StrCat("bash -c 'prlimit --nofile=", kLimit, ":", kLimit, " ", BinDir(),
                              "/ardmad --listen 127.0.0.1:0 --memory 16M --ucx off "
                              "--io-threads 1 --port-file ",
                              port, " >/dev/null 2>", log, " & echo $! > ", pid_file, "'"),
                 &out),
      0)
      << out;
  pid_t pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0);
  std::string address;
  testing::WaitUntil([&] { return static_cast<bool>(std::ifstream(port) >> address); },
                     absl::Seconds(10));
  ASSERT_FALSE(address.empty());
  auto early = Client::Connect(address);  // connected before the flood
  ASSERT_TRUE(early.ok()) << early.status();
  uint16_t port_number = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  std::vector<int> sockets;
  for (int i = 0; i < kConnections; ++i) {  // more than the limit: the rest wait in the backlog
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0) << "socket " << i;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port_number);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << "connect " << i << ": " << errno;
    sockets.push_back(fd);
  }
  absl::SleepFor(absl::Seconds(1));  // under test, with the next: the CPU used while idle
  long before = CpuTicks(pid);
  absl::SleepFor(absl::Seconds(2));
  long used = CpuTicks(pid) - before;
  EXPECT_LT(used, sysconf(_SC_CLK_TCK) / 2) << "ardmad spun while out of descriptors";
  // The connections it took are served meanwhile, and it took about as many as it may open.
  EXPECT_TRUE((*early)->Ping().ok());
  uint64_t open = testing::StatOf(**early, "connections.open");
  EXPECT_GT(open, kLimit * 9 / 10);
  EXPECT_LT(open, static_cast<uint64_t>(kLimit));
  std::ifstream in(log);
  int accept_lines = 0;
  for (std::string line; std::getline(in, line);)
    accept_lines += line.find("accept:") != std::string::npos;
  EXPECT_GE(accept_lines, 1);
  EXPECT_LE(accept_lines, 2) << "one line per 10 s, not one per failure";
  for (int fd : sockets) ::close(fd);
  // Descriptors free again: a new client is served (the pause is at most 1 s).
  auto client = Client::Connect(address);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Ping().ok());
  std::cout << "out of descriptors: " << kConnections << " connections at a limit of " << kLimit
            << ": " << open << " open, " << used << " CPU ticks in 2 s, " << accept_lines
            << " log line(s)\n";
  ::kill(pid, SIGKILL);
  ::setrlimit(RLIMIT_NOFILE, &own);
}

// A client that sends READs of 16 MiB and never reads the answers cannot make ardmad hold them all:
// past --max-queued the server stops reading that client (issue 22: 96 such READs took ardmad to
// 1.58 GB). Other clients are served meanwhile.
TEST(ArdmadTest, AClientThatNeverReadsCannotGrowTheServer) {
  Daemon daemon({"--memory", "64M", "--ucx", "off", "--max-queued", "32M"});
  ASSERT_FALSE(daemon.address().empty());
  uint16_t port =
      static_cast<uint16_t>(std::stoi(daemon.address().substr(daemon.address().rfind(':') + 1)));
  uint64_t before = ResidentBytes(daemon.pid());
  testing::RawSocket greedy(port);
  ASSERT_TRUE(greedy.ok());
  std::string read;
  wire::ReadEntry entry{.region = 0, .addr = 0, .len = 16u << 20};
  wire::EncodeReadRequest({&entry, 1}, &read);
  for (uint64_t id = 1; id <= 96; ++id) {
    ASSERT_TRUE(greedy.SendFrame(wire::Op::kRead, read, id, 0));
  }
  // Under test: a second in which the server could queue answers past its limit (no event
  // marks that it stopped).
  absl::SleepFor(absl::Seconds(1));
  auto other = Client::Connect(daemon.address());
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE((*other)->Ping().ok());
  uint64_t grown = ResidentBytes(daemon.pid()) - before;
  // 32 MiB queued, one answer being made, the kernel's socket buffers: far below 96 x 16 MiB.
  EXPECT_LT(grown, 200ull << 20) << "ardmad grew by " << (grown >> 20) << " MiB";
}

// A client that sends part of a frame and stalls has its connection closed after --frame-timeout
// (issue 22: 100 such connections held 843 MB with no end), while a frame that does complete is
// served however it was split.
TEST(ArdmadTest, AFrameThatNeverCompletesClosesItsConnection) {
  Daemon daemon({"--memory", "16M", "--ucx", "off", "--frame-timeout", "1s"});
  ASSERT_FALSE(daemon.address().empty());
  uint16_t port =
      static_cast<uint16_t>(std::stoi(daemon.address().substr(daemon.address().rfind(':') + 1)));
  std::string frame;
  size_t start = wire::BeginFrame(&frame);
  frame.append(1 << 20, 'x');
  wire::FinishFrame({.op = wire::Op::kPing, .request_id = 1}, start, &frame);

  testing::RawSocket slow(port), stalled(port);
  ASSERT_TRUE(slow.ok() && stalled.ok());
  ASSERT_TRUE(stalled.SendBytes(std::string_view(frame).substr(0, 4096)));
  // The slow one completes its frame in pieces, within the time.
  for (size_t at = 0; at < frame.size(); at += 256 << 10) {
    ASSERT_TRUE(slow.SendBytes(std::string_view(frame).substr(at, 256 << 10)));
    absl::SleepFor(absl::Milliseconds(100));  // under test: a slow sender's pace
  }
  std::optional<testing::RawResponse> echo = slow.Receive();
  ASSERT_TRUE(echo.has_value());
  EXPECT_EQ(echo->payload.size(), 1u << 20);
  EXPECT_TRUE(stalled.WaitClosed()) << "a stalled frame kept its connection";
}

// Every installed tool answers --version with its name, the project version and the commit, and
// exits 0 (without contacting any server).
TEST(ArdmadTest, EveryToolPrintsItsVersion) {
  for (const char* tool : {"ardmad", "ardma", "ardma-cp", "ardma-grep", "ardma-find", "ardma-demo",
                           "ardma-monitor", "ardma-monitord", "ardma-cc", "ardma-ccd"}) {
    std::string out;
    EXPECT_EQ(RunCommand(BinDir() + "/" + tool + " --version", &out), 0) << tool;
    EXPECT_THAT(out, ::testing::StartsWith(absl::StrCat(tool, " (Active RDMA toolkit) 0.")))
        << tool;
    EXPECT_THAT(out, HasSubstr(", commit ")) << tool;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << tool << ": " << out;
  }
  std::string out;
  // A flag nobody knows is a usage error, exit 2 (ardma-cp and ardma-find exit 1 there, as GNU cp
  // and find do).
  for (const char* tool :
       {"ardmad", "ardma", "ardma-grep", "ardma-demo", "ardma-monitor", "ardma-monitord"}) {
    EXPECT_EQ(RunCommand(BinDir() + "/" + tool + " --no-such-flag", &out), 2)
        << tool << ": " << out;
  }
  EXPECT_EQ(RunCommand(BinDir() + "/ardma-grep -V", &out), 0);
  EXPECT_THAT(out, ::testing::StartsWith("ardma-grep (Active RDMA toolkit)"));
}

// Usage errors exit 2 even when they are found before any server is contacted; the server being
// unreachable is 1.
TEST(ArdmaCliTest, UsageErrorsExitTwoBeforeContactingTheServer) {
  std::string ardma = BinDir() + "/ardma --server 127.0.0.1:1 ";
  std::string out;
  for (const char* bad :
       {"read xyz 5", "ping -1", "--hex write 0x200 zz", "write 0x200", "cas 8 1", "frobnicate"}) {
    EXPECT_EQ(RunCommand(ardma + bad, &out), 2) << bad << ": " << out;
  }
  EXPECT_EQ(RunCommand(BinDir() + "/ardma --server nosuchhost.invalid:1 ping", &out), 2) << out;
  EXPECT_THAT(out, HasSubstr("nosuchhost.invalid"));
  EXPECT_EQ(RunCommand(ardma + "ping", &out), 1) << out;  // well formed, nobody listening
  EXPECT_THAT(out, HasSubstr("unreachable"));
}

// `ardma ping N` prints each reply, then a summary as ping(8) does, with the 99th percentile.
TEST(ArdmaCliTest, PingCountPrintsEachReplyAndASummary) {
  testing::ServerProcess server({"--memory", "16M", "--ucx", "off"});
  ASSERT_FALSE(server.address().empty());
  std::string out;
  ASSERT_EQ(RunCommand(BinDir() + "/ardma --server " + server.address() + " ping 5", &out), 0)
      << out;
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u) << out;
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(lines[i], ::testing::StartsWith(
                              absl::StrCat("reply from ", server.address(), ": seq=", i, " ")));
  }
  EXPECT_EQ(lines[5], absl::StrCat("--- ", server.address(), " ping statistics ---"));
  double min = 0, avg = 0, max = 0, p99 = 0;
  ASSERT_EQ(std::sscanf(lines[6].c_str(), "5 replies, time min/avg/max/p99 = %lf/%lf/%lf/%lf us",
                        &min, &avg, &max, &p99),
            4)
      << lines[6];
  EXPECT_GT(min, 0);
  EXPECT_LE(min, avg);
  EXPECT_LE(avg, max);
  EXPECT_EQ(p99, max);  // of five replies the 99th percentile is the slowest
}

// The bash completion script (packaging/bash-completion/ardma): long options from each tool's
// --help, ardma's commands and subcommands; and every command it offers is one ardma knows.
TEST(ArdmaCliTest, BashCompletionCompletesOptionsCommandsAndSubcommands) {
  std::string script = absl::StrCat(
      "PATH=", BinDir(), ":$PATH; source ", ARDMA_SOURCE_DIR,
      "/packaging/bash-completion/ardma; t() { COMP_WORDS=(\"$@\"); "
      "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ardma_complete; echo \"${COMPREPLY[*]}\"; }; ",
      "t ardmad --isolate-s; t ardma-grep --ignore-c; t ardma d; t ardma --server x:1 dht s; "
      "t ardma fs mk; t ardma \"\"");
  std::string out;
  ASSERT_EQ(RunCommand("bash -c '" + script + "'", &out), 0) << out;
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  ASSERT_GE(lines.size(), 6u) << out;
  EXPECT_EQ(lines[0], "--isolate-spin");
  EXPECT_EQ(lines[1], "--ignore-case");
  EXPECT_EQ(lines[2], "dht");
  EXPECT_EQ(lines[3], "size scan");
  EXPECT_EQ(lines[4], "mkdir");
  for (absl::string_view command : absl::StrSplit(lines[5], ' ', absl::SkipEmpty())) {
    EXPECT_EQ(RunCommand(absl::StrCat(BinDir(), "/ardma --server 127.0.0.1:1 ", command), &out),
              command == "ping" || command == "stats" ? 1 : 2)
        << command << ": " << out;
    EXPECT_THAT(out, Not(HasSubstr("unknown command"))) << command;
  }
}

// At debug level the log tells connections, errors (with the client id) and LOADs apart; start
// and stop are at info.
TEST(ArdmadTest, DebugLogNamesConnectionsErrorsAndLoads) {
  std::string log = TempPath("ardmad.log"), port = TempPath("ardmad.port");
  std::string so = BinDir() + "/../active/ardma_test2.so";
  std::string script = absl::StrCat(
      "ARDMA_LOG_LEVEL=debug ", BinDir(), "/ardmad --listen 127.0.0.1:0 --memory 16M --port-file ",
      port, " 2>", log, " & p=$!; for i in $(seq 200); do [ -s ", port,
      " ] && break; sleep 0.05; done; a=$(cat ", port, "); ", BinDir(),
      "/ardma --server $a ping 1; ", BinDir(), "/ardma --server $a exec no.such; ", BinDir(),
      "/ardma --server $a load ", so, "; kill $p; wait $p");
  std::string out;
  RunCommand("bash -c '" + script + "'", &out);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("ardmad listening on 127.0.0.1:"));
  EXPECT_THAT(text, ::testing::ContainsRegex("connection from 127.0.0.1:[0-9]+ opened"));
  EXPECT_THAT(text, ::testing::ContainsRegex("connection from 127.0.0.1:[0-9]+ closed after 1 "));
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "EXECUTE #1 of client [0-9a-f]{16} failed: NOT_FOUND: no loaded library"));
  EXPECT_THAT(text, ::testing::ContainsRegex("loaded native code [0-9a-f]{16} \\([0-9]+ bytes\\)"));
  EXPECT_THAT(text, HasSubstr("received SIGTERM, stopping"));
  EXPECT_THAT(text, HasSubstr("ardmad stopped"));
}

// --metrics serves Prometheus text that the Prometheus client library parses and promtool finds
// clean (naming and type conventions), with counts and latency histograms that move as requests
// run, the build and the process; a public --metrics needs --insecure.
TEST(ArdmadTest, MetricsEndpointParsesAndMoves) {
  std::string log = TempPath("metrics.log"), port = TempPath("metrics.port");
  std::string m1 = TempPath("m1"), m2 = TempPath("m2"), lint = TempPath("promtool");
  std::string probe =
      std::string("/usr/bin/python3 ") + ARDMA_SOURCE_DIR + "/scripts/metrics_probe.py";
  std::string ardma = BinDir() + "/ardma --server $a ";
  std::string script = absl::StrCat(
      BinDir(), "/ardmad --listen 127.0.0.1:0 --memory 16M --isolate all --metrics 127.0.0.1:0 ",
      "--port-file ", port, " 2>", log, " & p=$!; for i in $(seq 200); do [ -s ", port,
      " ] && break; sleep 0.05; done; a=$(cat ", port, "); url=$(grep -o \"http://[^ ]*/metrics\" ",
      log, "); ", ardma, "ping 3; ", ardma, "exec no.such; ", probe, " $url >", m1, "; ", ardma,
      "ping 2; ", probe, " $url --dashboard ", ARDMA_SOURCE_DIR, "/packaging/grafana/ardmad.json >",
      m2, "; echo \"probe exit $?\" >>", m2, "; curl -sf $url | promtool check metrics >", lint,
      " 2>&1; echo \"promtool exit $?\" >>", lint, "; kill $p; wait $p");
  std::string out;
  RunCommand("bash -c '" + script + "'", &out);
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::string first = read(m1), second = read(m2);
  EXPECT_THAT(first, HasSubstr("ardma_requests_total{op=\"ping\"} 3\n")) << first << out;
  EXPECT_THAT(second, HasSubstr("ardma_requests_total{op=\"ping\"} 5\n")) << second;
  EXPECT_THAT(first, HasSubstr("ardma_request_duration_seconds_count{op=\"ping\"} 3\n"));
  EXPECT_THAT(second, HasSubstr("ardma_request_duration_seconds_count{op=\"ping\"} 5\n"));
  EXPECT_THAT(first, ::testing::ContainsRegex(
                         "ardma_request_duration_seconds_bucket\\{le=\"\\+Inf\",op=\"ping\"\\} 3"));
  EXPECT_THAT(first, HasSubstr("ardma_errors_total{} 1\n"));
  EXPECT_THAT(first, HasSubstr("ardma_heap_size_bytes{} 1.67772e+07\n"));
  EXPECT_THAT(first, HasSubstr("ardma_connections_open{} "));
  EXPECT_THAT(first, HasSubstr("ardma_owners_live{} "));  // a level: a gauge, no _total
  EXPECT_THAT(first, HasSubstr("ardma_parked_total{} 0\n"));
  EXPECT_THAT(first, HasSubstr("ardma_execute_seconds_total{} "));
  EXPECT_THAT(first, HasSubstr("ardma_heap_fragmentation_ratio{} "));
  EXPECT_THAT(first, ::testing::ContainsRegex(
                         "ardma_build_info\\{commit=\"[^\"]+\",version=\"[^\"]+\"\\} 1"));
  EXPECT_THAT(first, HasSubstr("process_start_time_seconds{} "));
  EXPECT_THAT(first, Not(HasSubstr("_total_total")));
  EXPECT_EQ(read(lint), "promtool exit 0\n");  // nothing to say
  // Every metric the packaged Grafana dashboard queries is served.
  EXPECT_THAT(second, ::testing::EndsWith("probe exit 0\n")) << out;

  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 127.0.0.1:0 --metrics 0.0.0.0:0", &out), 2);
  EXPECT_THAT(out, HasSubstr("--insecure"));
}

// A memory file whose header was damaged makes ardmad refuse to start instead of re-formatting
// it (and losing everything in it); --format formats it on purpose.
TEST(ArdmadTest, ADamagedMemoryFileIsRefusedUnlessFormatIsGiven) {
  std::string heap_file = TempPath("damaged_heap");
  std::filesystem::remove(heap_file);
  {
    Daemon d({"--memory", "16M", "--memory-file", heap_file});
    ASSERT_FALSE(d.address().empty());
    EXPECT_EQ(WEXITSTATUS(d.Kill(SIGTERM)), 0);
  }
  {
    std::fstream f(heap_file, std::ios::in | std::ios::out | std::ios::binary);
    f.write(std::string(8, '\0').data(), 8);  // 8 zero bytes at heap offset 0
  }
  std::string out;
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 127.0.0.1:0 --memory-file " + heap_file, &out),
            1);
  EXPECT_THAT(out, HasSubstr("holds no heap"));
  EXPECT_THAT(out, HasSubstr("--format"));
  {
    Daemon d({"--memory-file", heap_file, "--format"});
    ASSERT_FALSE(d.address().empty()) << "--format did not format it";
    EXPECT_EQ(WEXITSTATUS(d.Kill(SIGTERM)), 0);
  }
  std::filesystem::remove(heap_file);
}

// Every byte of the heap's header damaged in turn (issue 32, C: one changed byte of the root
// directory's bucket count went unnoticed and a stored root was gone; another damaged word was
// refused only after 59 bytes of the file had been rewritten). ardmad refuses each, says what is
// wrong, and leaves the file exactly as it found it; the undamaged file still opens with its data.
TEST(ArdmadTest, EveryDamagedHeaderByteIsRefusedAndNothingIsWritten) {
  std::string heap_file = TempPath("header_damage");
  std::filesystem::remove(heap_file);
  uint64_t root_value = 0;
  {
    // (1 MiB: each of the ~200 damaged copies is written and read back whole.)
    Daemon d({"--memory", "1M", "--memory-file", heap_file, "--ucx", "off"});
    ASSERT_FALSE(d.address().empty());
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(d.address());
    ASSERT_TRUE(client.ok()) << client.status();
    RemoteContext ctx(client->get(), {});
    for (int size : {16, 100, 3000, 20000}) ASSERT_TRUE(heap::Allocate(ctx, size).ok());
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, 40);
    ASSERT_TRUE(block.ok());
    root_value = *block;
    ASSERT_TRUE(heap::GetOrCreateRoot(ctx, "damage-test", root_value).ok());
    EXPECT_EQ(WEXITSTATUS(d.Kill(SIGTERM)), 0);
  }
  auto read_file = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto write_file = [](const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  const std::string good = read_file(heap_file);
  ASSERT_EQ(good.size(), 1u << 20);
  // The directory bucket that holds the root (the only nonzero one).
  uint64_t dir = 0, buckets = 0;
  std::memcpy(&dir, good.data() + 48, 8);
  std::memcpy(&buckets, good.data() + 56, 8);
  std::vector<uint64_t> offsets;
  for (uint64_t at = 0; at < 192; ++at) offsets.push_back(at);   // every header word
  for (uint64_t at : {192, 4096, 16383}) offsets.push_back(at);  // the reserved bytes
  for (uint64_t b = 0; b < buckets; ++b) {
    uint64_t entry;
    std::memcpy(&entry, good.data() + dir + 8 * b, 8);
    if (entry == 0) continue;
    for (uint64_t k = 0; k < 8; ++k) offsets.push_back(dir + 8 * b + k);
  }
  // The roots' buckets: this test's root and the server's own (ardma.owners).
  ASSERT_GE(offsets.size(), 192u + 3u + 8u) << "no root in the directory";
  int refused = 0;
  for (uint64_t at : offsets) {
    std::string damaged = good;
    damaged[at] = static_cast<char>(damaged[at] ^ 0xff);
    write_file(heap_file, damaged);
    std::string out;
    // Bounded: an ardmad that accepted the damage would serve for ever.
    int code = RunCommand("timeout 10 " + BinDir() +
                              "/ardmad --listen 127.0.0.1:0 --ucx off --memory-file " + heap_file,
                          &out);
    EXPECT_EQ(code, 1) << "byte " << at << ": " << out;
    EXPECT_THAT(out, ::testing::AnyOf(HasSubstr("is damaged"), HasSubstr("holds no heap"),
                                      HasSubstr("layout version"), HasSubstr("holds a heap of")))
        << "byte " << at;
    EXPECT_TRUE(read_file(heap_file) == damaged) << "byte " << at << ": the file was written";
    refused += code == 1;
  }
  EXPECT_EQ(refused, static_cast<int>(offsets.size()));
  // The words name themselves.
  {
    std::string damaged = good;
    damaged[56] = static_cast<char>(damaged[56] ^ 0x20);
    write_file(heap_file, damaged);
    std::string out;
    RunCommand(BinDir() + "/ardmad --listen 127.0.0.1:0 --ucx off --memory-file " + heap_file,
               &out);
    EXPECT_THAT(out, HasSubstr("'root directory buckets' (offset 56)"));
  }
  write_file(heap_file, good);
  {
    Daemon d({"--memory-file", heap_file, "--ucx", "off"});
    ASSERT_FALSE(d.address().empty()) << "the undamaged file did not open";
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(d.address());
    ASSERT_TRUE(client.ok()) << client.status();
    RemoteContext ctx(client->get(), {});
    EXPECT_EQ(*heap::GetRoot(ctx, "damage-test"), root_value);
    EXPECT_EQ(WEXITSTATUS(d.Kill(SIGTERM)), 0);
  }
  std::filesystem::remove(heap_file);
}

TEST(ArdmadTest, HelpAndBadFlags) {
  std::string out;
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("--memory-file PATH"));
  EXPECT_THAT(out, HasSubstr("--preload DIR"));
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --no-such-flag", &out), 2);
  EXPECT_THAT(out, HasSubstr("ardmad: unrecognized option '--no-such-flag'\n"
                             "Try 'ardmad --help' for more information.\n"));
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --memory 12Q", &out), 2);
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen nonsense", &out), 1);
  EXPECT_THAT(out, HasSubstr("bad address"));
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 127.0.0.1:0 --preload /nonexistent", &out), 1);
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --nic-cpu x", &out), 2);
  EXPECT_THAT(out, HasSubstr("--nic-cpu"));
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 127.0.0.1:0 --nic-cpu 900", &out), 1);
  EXPECT_THAT(out, HasSubstr("CPU 900"));
  if (::geteuid() == 0) {  // (as another user, --isolate-user itself is refused)
    EXPECT_EQ(RunCommand(BinDir() + "/ardmad --isolate all --isolate-user no-such-user-here", &out),
              2);
    EXPECT_THAT(out, HasSubstr("no user 'no-such-user-here'"));
    EXPECT_EQ(RunCommand(BinDir() + "/ardmad --isolate all --isolate-user root", &out), 2);
    EXPECT_THAT(out, HasSubstr("is root: not a sandbox"));
  }
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --isolate-cpu 0", &out), 2);
  EXPECT_THAT(out, HasSubstr("--isolate-cpu"));
}

// The security flags from the command line (docs/SECURITY.md): a readable auth file and a public
// listener without one are refused in one line; with a private file, `ardma --auth-file` works and
// a client without it is told what to do.
TEST(ArdmadTest, AuthFileProtectedModeAndClientsWithAndWithoutASecret) {
  std::string out;
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 0.0.0.0:0", &out), 1);
  EXPECT_THAT(out, HasSubstr("without authentication"));
  EXPECT_THAT(out, HasSubstr("--insecure"));

  std::string auth = TempPath("auth");
  std::ofstream(auth) << "# test secrets\nops 0123456789abcdef0123 all\n";
  ::chmod(auth.c_str(), 0644);
  EXPECT_EQ(RunCommand(BinDir() + "/ardmad --listen 127.0.0.1:0 --auth-file " + auth, &out), 2);
  EXPECT_THAT(out, HasSubstr("chmod 600"));
  ::chmod(auth.c_str(), 0600);

  Daemon d({"--memory", "16M", "--auth-file", auth});
  ASSERT_FALSE(d.address().empty());
  std::string ardma = BinDir() + "/ardma --server " + d.address() + " ";
  EXPECT_EQ(RunCommand(ardma + "--auth-file " + auth + " write 20000 hello", &out), 0) << out;
  EXPECT_EQ(RunCommand(ardma + "--auth-file " + auth + " read --raw 20000 5", &out), 0);
  EXPECT_EQ(out, "hello");
  EXPECT_EQ(RunCommand("ARDMA_AUTH_FILE=" + auth + " " + ardma + "ping 1", &out), 0) << out;
  EXPECT_EQ(RunCommand(ardma + "ping 1", &out), 1);
  EXPECT_THAT(out, HasSubstr("requires authentication"));

  // The file tools take --auth-file as well.
  std::string local = TempPath("local.txt");
  std::ofstream(local) << "hello world\n";
  std::string server = " --server " + d.address() + " ";
  EXPECT_EQ(RunCommand(BinDir() + "/ardma-cp" + server + "--auth-file " + auth + " " + local +
                           " dfs:/f.txt",
                       &out),
            0)
      << out;
  EXPECT_EQ(RunCommand(BinDir() + "/ardma-grep --server=" + d.address() + " --auth-file=" + auth +
                           " world dfs:/f.txt",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "hello world\n");
  EXPECT_EQ(RunCommand(BinDir() + "/ardma-find --server=" + d.address() + " --auth-file=" + auth +
                           " dfs:/ -name 'f.*'",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "dfs:/f.txt\n");
  EXPECT_EQ(RunCommand(BinDir() + "/ardma-find --server=" + d.address() + " dfs:/", &out), 1);
  EXPECT_THAT(out, HasSubstr("requires authentication"));
}

TEST(ArdmaCliTest, CommandsAgainstALiveServer) {
  Daemon d({"--memory", "16M"});
  ASSERT_FALSE(d.address().empty());
  std::string ardma = BinDir() + "/ardma --server " + d.address() + " ";
  std::string out;
  EXPECT_EQ(RunCommand(ardma + "ping 2", &out), 0);
  EXPECT_THAT(out, HasSubstr("seq=1"));
  EXPECT_EQ(RunCommand(ardma + "write 20000 hello", &out), 0);
  EXPECT_EQ(RunCommand(ardma + "read --raw 20000 5", &out), 0);
  EXPECT_EQ(out, "hello");
  EXPECT_EQ(RunCommand(ardma + "fetch-add 20008 5", &out), 0);
  EXPECT_EQ(RunCommand(ardma + "cas 20008 5 7", &out), 0);
  EXPECT_THAT(out, HasSubstr("swapped old=5"));
  EXPECT_EQ(RunCommand(ardma + "cas 20009 5 7", &out), 1);
  EXPECT_THAT(out, HasSubstr("not 8-byte aligned"));
  EXPECT_EQ(RunCommand(ardma + "read 99999999999 4", &out), 1);
  EXPECT_THAT(out, HasSubstr("OUT_OF_RANGE"));
  EXPECT_EQ(RunCommand(ardma + "exec no.such", &out), 1);
  EXPECT_THAT(out, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(RunCommand(ardma + "load " + BinDir() + "/../active/ardma_test2.so", &out), 0);
  std::string hash = out.substr(0, 64);
  EXPECT_EQ(RunCommand(ardma + "has " + hash, &out), 0);
  EXPECT_EQ(RunCommand(ardma + "--hex exec test2.double 0500000000000000", &out), 0);
  EXPECT_EQ(out, "0a00000000000000\n");
  EXPECT_EQ(RunCommand(ardma + "exec --i64 test2.double 21", &out), 0);
  EXPECT_EQ(out, "42\n");
  EXPECT_EQ(RunCommand(ardma + "exec --i32 --i64 test2.double 21", &out), 2);
  EXPECT_EQ(RunCommand(ardma + "exec --i64 test2.double x", &out), 2);
  EXPECT_EQ(RunCommand(ardma + "exec --i32 test2.double 21", &out), 1);  // 4 bytes: refused
  EXPECT_EQ(RunCommand(ardma + "stats", &out), 0);
  EXPECT_THAT(out, HasSubstr("requests.execute"));
  EXPECT_EQ(RunCommand(ardma + "stats --json", &out), 0);
  EXPECT_THAT(out, ::testing::StartsWith("{\"requests.ping\": "));
  EXPECT_THAT(out, HasSubstr(", \"heap.size\": 16777216"));
  EXPECT_THAT(out, ::testing::EndsWith("}\n"));
  // The DHT at a shell, as redis-cli's GET and SET.
  EXPECT_EQ(RunCommand(ardma + "dht put users alice 42", &out), 0) << out;
  EXPECT_EQ(out, "new\n");
  EXPECT_EQ(RunCommand(ardma + "dht put users alice 43", &out), 0);
  EXPECT_EQ(out, "replaced\n");
  EXPECT_EQ(RunCommand(ardma + "--mode rdma dht get users alice", &out), 0);
  EXPECT_EQ(out, "43\n");
  EXPECT_EQ(RunCommand(ardma + "dht insert users alice 44", &out), 1);
  EXPECT_THAT(out, HasSubstr("already: 43"));
  EXPECT_EQ(RunCommand(ardma + "dht size users", &out), 0);
  EXPECT_EQ(out, "1\n");
  EXPECT_EQ(RunCommand(ardma + "dht del users alice", &out), 0);
  EXPECT_EQ(out, "1\n");
  EXPECT_EQ(RunCommand(ardma + "dht get users alice", &out), 1);
  EXPECT_THAT(out, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(RunCommand(ardma + "dht get users", &out), 2);
  EXPECT_THAT(out, HasSubstr("usage: ardma dht get TABLE KEY"));
  // scan, export and import: a table copied through a file into another. Each step: the
  // command, its exit status, and what its output is (exact: ends with "\n") or contains.
  for (const char* key : {"bob", "carol", "dave"}) {
    ASSERT_EQ(RunCommand(ardma + "dht put users " + key + " \"v of " + key + "\"", &out), 0);
  }
  std::string dump = TempPath("users.dht");
  const struct {
    std::string command;
    int exit;
    std::string out;
  } steps[] = {
      {"dht scan users | sort", 0, "bob\ncarol\ndave\n"},
      {"dht export users " + dump, 0, "exported 3 keys"},
      {"--mode rdma dht import copy " + dump, 0, "imported 3 keys"},
      {"dht get copy carol", 0, "v of carol\n"},
      {"dht size copy", 0, "3\n"},
      {"dht import copy /etc/hostname", 1, "not an `ardma dht export` file"},
      {"dht scan nosuch", 1, "NOT_FOUND"},
  };
  for (const auto& step : steps) {
    EXPECT_EQ(RunCommand(ardma + step.command, &out), step.exit) << step.command << ": " << out;
    if (step.out.back() == '\n') {
      EXPECT_EQ(out, step.out) << step.command;
    } else {
      EXPECT_THAT(out, HasSubstr(step.out)) << step.command;
    }
  }
  EXPECT_EQ(RunCommand(ardma + "frobnicate", &out), 2);
  EXPECT_EQ(RunCommand(ardma + "read 1", &out), 2);
  EXPECT_THAT(out, HasSubstr("usage: ardma read ADDR LEN"));
}

TEST(ArdmaCliTest, LockRunsTheCommandUnderTheLockLikeFlock) {
  Daemon d({});
  ASSERT_FALSE(d.address().empty());
  std::string ardma = BinDir() + "/ardma --server " + d.address() + " ";
  std::string out;
  // The command's exit status comes back; it sees the fencing token.
  EXPECT_EQ(RunCommand(ardma + "lock job -- sh -c 'echo token=$ARDMA_LOCK_TOKEN; exit 3'", &out),
            3);
  EXPECT_THAT(out, HasSubstr("token=1"));
  EXPECT_EQ(RunCommand(ardma + "lock job -- true", &out), 0);
  // Starts `lock_args -- COMMAND` in the background, COMMAND holding the lock for `seconds`;
  // returns once it holds it. pclose() it to wait for it.
  std::string marker = TempPath("lock_marker");
  auto hold = [&](const std::string& lock_args, int seconds) -> std::FILE* {
    std::filesystem::remove(marker);
    std::string holder = ardma + lock_args + " -- sh -c 'touch " + marker + "; sleep " +
                         std::to_string(seconds) + "'";
    std::FILE* background = ::popen(holder.c_str(), "r");
    if (background != nullptr) {
      testing::WaitUntil([&] { return std::filesystem::exists(marker); }, absl::Seconds(5));
    }
    return std::filesystem::exists(marker) ? background : nullptr;
  };
  // Held by a longer command: a second one gives up after its timeout with status 1.
  std::FILE* background = hold("lock job", 3);
  ASSERT_NE(background, nullptr);
  EXPECT_EQ(RunCommand(ardma + "lock job --timeout 0.2 -- true", &out), 1);
  EXPECT_THAT(out, HasSubstr("DEADLINE_EXCEEDED"));
  // An exclusive holder keeps a shared taker out too.
  EXPECT_EQ(RunCommand(ardma + "lock job --shared --timeout 0.2 -- true", &out), 1);
  EXPECT_EQ(::pclose(background), 0);
  // Shared holders do not conflict with each other, only with an exclusive taker.
  background = hold("lock job --shared", 2);
  ASSERT_NE(background, nullptr);
  EXPECT_EQ(RunCommand(ardma + "lock job --shared --timeout 1 -- true", &out), 0) << out;
  EXPECT_EQ(RunCommand(ardma + "lock job --timeout 0.2 -- true", &out), 1);
  EXPECT_EQ(::pclose(background), 0);
  std::filesystem::remove(marker);
  EXPECT_EQ(RunCommand(ardma + "lock job", &out), 2);
  EXPECT_EQ(RunCommand(ardma + "lock job --lease 1ms -- true", &out), 2);
  EXPECT_EQ(RunCommand(ardma + "lock job -- /nonexistent/program", &out), 127);
}

// Whether process `pid` is gone (or a zombie nobody has reaped yet).
bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'Z';
}

// `ardma lock` never leaves its command running without the lock: killed (even by SIGKILL), it
// takes the command and what the command started with it; a lost lease stops the command.
TEST(ArdmaCliTest, LockedCommandNeverOutlivesTheLock) {
  Daemon d({});
  ASSERT_FALSE(d.address().empty());
  std::string pid_file = TempPath("lock_child_pid");
  auto start = [&](const std::string& lease) -> std::pair<pid_t, pid_t> {
    std::filesystem::remove(pid_file);
    std::string script = "sleep 60 & echo $! > " + pid_file + "; wait";
    std::vector<std::string> args = {BinDir() + "/ardma",
                                     "--server",
                                     d.address(),
                                     "lock",
                                     "job",
                                     "--lease",
                                     lease,
                                     "--",
                                     "sh",
                                     "-c",
                                     script};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t ardma;
    if (::posix_spawn(&ardma, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
      return {-1, -1};
    pid_t sleeper = -1;
    testing::WaitUntil(
        [&] {
          std::ifstream in(pid_file);
          if (!(in >> sleeper)) sleeper = -1;
          return sleeper > 0;
        },
        absl::Seconds(5));
    return {ardma, sleeper};
  };
  auto [ardma, sleeper] = start("10s");
  ASSERT_GT(ardma, 0);
  ASSERT_GT(sleeper, 0);
  ASSERT_EQ(::kill(ardma, SIGKILL), 0);
  int status;
  ::waitpid(ardma, &status, 0);
  bool gone = testing::WaitUntil([&] { return Gone(sleeper); }, absl::Seconds(3));
  EXPECT_TRUE(gone) << "the command's child outlived a SIGKILLed ardma lock";
  // A lease that runs out while `ardma lock` cannot renew it (stopped): the guard stops the command
  // on its own clock before the lease can run out, so before anyone else can take the lock.
  std::tie(ardma, sleeper) = start("300ms");
  ASSERT_GT(sleeper, 0);
  ASSERT_EQ(::kill(ardma, SIGSTOP), 0);
  std::string out;
  // Someone else takes the lock meanwhile; by then the command is gone.
  EXPECT_EQ(
      RunCommand(BinDir() + "/ardma --server " + d.address() + " lock job --timeout 5 -- true",
                 &out),
      0)
      << out;
  EXPECT_TRUE(Gone(sleeper)) << "the command ran on when another took the lock";
  ASSERT_EQ(::kill(ardma, SIGCONT), 0);
  ASSERT_EQ(::waitpid(ardma, &status, 0), ardma);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL) << status;
}

TEST(ArdmaCliTest, FsCommands) {
  Daemon d({});
  ASSERT_FALSE(d.address().empty());
  std::string fs = BinDir() + "/ardma --server " + d.address() + " fs ";
  std::string local = TempPath("fs_local"), back = TempPath("fs_back");
  {
    std::ofstream out(local, std::ios::binary);
    for (int i = 0; i < 100000; ++i) out << i << "\n";  // several blocks
  }
  std::string out;
  EXPECT_EQ(RunCommand(fs + "mkdir -p /a/b/c", &out), 0) << out;
  EXPECT_EQ(RunCommand(fs + "mkdir -p /a/b", &out), 0) << out;  // present: fine with -p
  EXPECT_EQ(RunCommand(fs + "mkdir /a", &out), 1);
  EXPECT_THAT(out, HasSubstr("ALREADY_EXISTS"));
  EXPECT_EQ(RunCommand(fs + "put " + local + " /a/b/c/data", &out), 0) << out;
  EXPECT_EQ(RunCommand(fs + "get /a/b/c/data " + back, &out), 0) << out;
  std::ifstream l(local, std::ios::binary), b(back, std::ios::binary);
  std::string ls((std::istreambuf_iterator<char>(l)), std::istreambuf_iterator<char>());
  std::string bs((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>());
  EXPECT_EQ(ls, bs);
  EXPECT_EQ(RunCommand(fs + "ls -l /a/b/c", &out), 0);
  EXPECT_THAT(out, HasSubstr(absl::StrCat(ls.size(), " ")));
  EXPECT_EQ(RunCommand(fs + "mv /a/b /moved", &out), 0) << out;
  EXPECT_EQ(RunCommand(fs + "ls /", &out), 0);
  EXPECT_EQ(out, "a\nmoved\n");
  EXPECT_EQ(RunCommand(fs + "ls", &out), 0);  // no path: the root, as ls lists "."
  EXPECT_EQ(out, "a\nmoved\n");
  // The same file system walked by the DFS's code here, over one-sided operations.
  std::string rdma = BinDir() + "/ardma --server " + d.address() + " --mode rdma fs ";
  EXPECT_EQ(RunCommand(rdma + "ls /", &out), 0) << out;
  EXPECT_EQ(out, "a\nmoved\n");
  EXPECT_EQ(RunCommand(rdma + "cat /moved/c/data | head -2", &out), 0) << out;
  EXPECT_EQ(out, "0\n1\n");
  EXPECT_EQ(RunCommand(fs + "--mode fast ls /", &out), 2);
  EXPECT_THAT(out, HasSubstr("unknown mode 'fast'"));
  EXPECT_EQ(RunCommand(fs + "stat /moved", &out), 0);
  EXPECT_THAT(out, HasSubstr("/moved: directory, 1 entry,"));
  EXPECT_EQ(RunCommand(fs + "stat /moved/c/data", &out), 0);
  EXPECT_THAT(out, HasSubstr("file, " + std::to_string(ls.size()) + " bytes"));
  EXPECT_EQ(RunCommand(fs + "cat /moved/c/data | head -3", &out), 0);
  EXPECT_EQ(out, "0\n1\n2\n");
  EXPECT_EQ(RunCommand(fs + "df", &out), 0);
  EXPECT_THAT(out, HasSubstr("1 files, 4 directories"));
  // Symbolic links: made, listed with their target, read and followed by cat, removed alone.
  EXPECT_EQ(RunCommand(fs + "ln /moved/c/data /hard", &out), 2);  // no hard links
  EXPECT_THAT(out, HasSubstr("use -s"));
  EXPECT_EQ(RunCommand(fs + "ln -s c/data /moved/link", &out), 0) << out;
  EXPECT_EQ(RunCommand(fs + "readlink /moved/link", &out), 0) << out;
  EXPECT_EQ(out, "c/data\n");
  EXPECT_EQ(RunCommand(fs + "ls -l /moved", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr(" link -> c/data\n"));
  EXPECT_THAT(out, HasSubstr("\nl0777 "));
  EXPECT_EQ(RunCommand(fs + "cat /moved/link | head -2", &out), 0) << out;
  EXPECT_EQ(out, "0\n1\n");
  EXPECT_EQ(RunCommand(fs + "stat /moved/link", &out), 0);
  EXPECT_THAT(out, HasSubstr("symbolic link, 6 bytes"));
  EXPECT_EQ(RunCommand(fs + "rm /moved/link", &out), 0) << out;
  EXPECT_EQ(RunCommand(fs + "readlink /moved/c/data", &out), 1);
  EXPECT_THAT(out, HasSubstr("not a symbolic link"));
  EXPECT_EQ(RunCommand(fs + "rm /moved", &out), 1);  // a directory without -r
  EXPECT_EQ(RunCommand(fs + "rm -r /moved", &out), 0) << out;
  EXPECT_EQ(RunCommand(fs + "ls /", &out), 0);
  EXPECT_EQ(out, "a\n");
  EXPECT_EQ(RunCommand(fs + "cat /nope", &out), 1);
  EXPECT_THAT(out, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(RunCommand(fs + "frob", &out), 2);
  EXPECT_EQ(RunCommand(fs + "mv /a", &out), 2);
  EXPECT_EQ(RunCommand(fs + "--fs other ls /", &out), 0);  // another file system: empty
  EXPECT_EQ(out, "");
  std::filesystem::remove(local);
  std::filesystem::remove(back);
}

TEST(ArdmaCliTest, UnixSocketAddress) {
  std::string sock = TempPath("ardmad_sock");
  Daemon d({"--memory", "16M", "--unix-socket", sock});
  ASSERT_FALSE(d.address().empty());
  std::string out;
  EXPECT_EQ(RunCommand(BinDir() + "/ardma --server unix:" + sock + " ping", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("reply from unix:" + sock));
  EXPECT_EQ(WEXITSTATUS(d.Kill(SIGTERM)), 0);
  EXPECT_FALSE(std::filesystem::exists(sock));  // removed on a clean stop
}

TEST(ArdmaCliTest, PreloadedLibraryIsCallableAtOnce) {
  std::string dir = TempPath("preload");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(BinDir() + "/../active/ardma_test2.so", dir + "/ardma_test2.so");
  Daemon d({"--memory", "16M", "--preload", dir});
  ASSERT_FALSE(d.address().empty());
  std::string out;
  EXPECT_EQ(RunCommand(BinDir() + "/ardma --server " + d.address() +
                           " --hex exec test2.double 0200000000000000",
                       &out),
            0);
  EXPECT_EQ(out, "0400000000000000\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ardma
