// ardmad --isolate's sandbox (core/active/sandbox.h, docs/SECURITY.md): shipped code that opens
// files, makes sockets, starts programs, forks, traces or signals the server, or writes memory its
// caller may only read, costs its request (and its worker), the request's status names what it
// tried, and the server answers the next request; a thousand such requests leave no worker,
// descriptor or memory behind.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/active/sandbox.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/security/auth.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;
using testing::StatOf;
using testing::U64s;

// The descriptors process `pid` has open.
size_t OpenDescriptors(pid_t pid) {
  std::error_code error;
  size_t n = 0;
  for (std::filesystem::directory_iterator it(absl::StrCat("/proc/", pid, "/fd"), error), end;
       !error && it != end; it.increment(error)) {
    ++n;
  }
  return n;
}

// Its children (isolated workers, trial loads).
std::vector<std::string> Children(pid_t pid) {
  std::string out;
  testing::RunCommand(absl::StrCat("pgrep -P ", pid), &out);
  return absl::StrSplit(out, '\n', absl::SkipEmpty());
}

// Its resident memory in KiB.
int64_t ResidentKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

std::vector<std::string> IsolatedAll(std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--memory", "16M", "--ucx",     "off",
                                    "--isolate", "all", "--workers", "1"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

// An ardmad with --isolate all and one worker (and `extra` flags), and a client of it.
struct Isolated {
  explicit Isolated(std::vector<std::string> extra = {}) : daemon(IsolatedAll(std::move(extra))) {
    if (daemon.address().empty()) return;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(daemon.address());
    if (c.ok()) client = *std::move(c);
  }
  // Whether it started and the hostile and test libraries are loaded.
  bool Ready() {
    return client != nullptr && EnsureLoaded(*client, active_libraries::hostile()).ok() &&
           EnsureLoaded(*client, active_libraries::test()).ok();
  }
  testing::ServerProcess daemon;
  std::unique_ptr<Client> client;
};

TEST(SandboxTest, EachForbiddenAttemptCostsOnlyItsWorkerAndItsStatusNamesIt) {
  Isolated s;
  ASSERT_TRUE(s.Ready());
  struct Case {
    const char* function;
    const char* says;
  };
  // Killed by the seccomp allow-list: the status names the system call.
  const std::vector<Case> killed = {
      {"hostile.raw_open", "forbidden system call: open"},
      {"hostile.socket", "forbidden system call: socket"},
      {"hostile.connect", "forbidden system call: connect"},
      {"hostile.execve", "forbidden system call: execve"},
      {"hostile.fork", "forbidden system call: clone"},
      {"hostile.ptrace", "forbidden system call: ptrace"},
      {"hostile.kill_parent", "forbidden system call: kill"},
  };
  for (const Case& c : killed) {
    absl::StatusOr<std::string> r = s.client->Execute(c.function, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << c.function << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.function;
    // The server answers the next request, in a new worker.
    absl::StatusOr<std::string> next = s.client->Execute("test.echo", "still here");
    ASSERT_TRUE(next.ok()) << "after " << c.function << ": " << next.status();
    EXPECT_EQ(*next, "still here");
  }
  EXPECT_EQ(StatOf(*s.client, "isolated.forbidden"), killed.size());
  EXPECT_EQ(StatOf(*s.client, "isolated.restarts"), killed.size());

  // Refused by Landlock (and by the user, nobody): the call returns, the function reports it.
  absl::StatusOr<std::string> shadow = s.client->Execute("hostile.open_shadow", "");
  EXPECT_EQ(shadow.status().code(), absl::StatusCode::kPermissionDenied) << shadow.status();
  EXPECT_THAT(shadow.status().message(), HasSubstr("open /etc/shadow: Permission denied"));
  EXPECT_EQ(StatOf(*s.client, "isolated.restarts"), killed.size());  // that worker lives on
  EXPECT_EQ(::kill(s.daemon.pid(), 0), 0);
}

// A new library is loaded in a trial process first; with isolation that process is sandboxed
// too, so a constructor that makes a socket gets the LOAD refused, naming the call. Without
// isolation (trusted code) the same library loads.
TEST(SandboxTest, ALibraryWhoseConstructorMakesASocketIsRefusedAtLoad) {
  {
    testing::ServerProcess daemon(IsolatedAll());
    ASSERT_FALSE(daemon.address().empty());
    auto client = Client::Connect(daemon.address());
    ASSERT_TRUE(client.ok()) << client.status();
    absl::Status loaded = EnsureLoaded(**client, active_libraries::hostile_ctor());
    EXPECT_EQ(loaded.code(), absl::StatusCode::kPermissionDenied) << loaded;
    EXPECT_THAT(loaded.message(), HasSubstr("forbidden system call: socket"));
    EXPECT_TRUE((*client)->Ping().ok());
  }
  testing::ServerProcess trusting({"--memory", "16M", "--ucx", "off", "--isolate", "none"});
  ASSERT_FALSE(trusting.address().empty());
  auto client = Client::Connect(trusting.address());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(EnsureLoaded(**client, active_libraries::hostile_ctor()).ok());
}

// An isolating ardmad with an auth file of four secrets, each 32 times its name's first letter:
// "writer" (read, write, exec, load), "reader" (read, exec), "admin" (read, admin: STATS) and
// "boss" (everything).
struct WithSecrets {
  static std::string AuthFile() {
    std::string auth = testing::TempPath("sandbox.auth");
    std::ofstream(auth) << "writer " << std::string(32, 'w') << " read,write,exec,load\n"
                        << "reader " << std::string(32, 'r') << " read,exec\n"
                        << "admin " << std::string(32, 'a') << " read,admin\n"
                        << "boss " << std::string(32, 'b') << " read,write,exec,load,admin\n";
    ::chmod(auth.c_str(), 0600);
    return auth;
  }
  explicit WithSecrets(std::string isolate = "all")
      : daemon(IsolatedAll({"--auth-file", AuthFile(), "--isolate", std::move(isolate)})) {}
  absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& name, char fill) {
    ClientOptions options;
    options.credentials = security::Credentials{name, std::string(32, fill)};
    return Client::Connect(daemon.address(), options);
  }
  testing::ServerProcess daemon;
};

// While it lives, a server started from this process marks a file if it maps the ctor_mark
// library into its own process (ctor_mark_functions.cc): whether the file exists says so.
class ServerMapsMark {
 public:
  ServerMapsMark() : file_(testing::TempPath("ctor_mark")) {
    std::filesystem::remove(file_);
    ::setenv("ARDMA_TEST_MARK_PARENT", absl::StrCat(::getpid()).c_str(), 1);
    ::setenv("ARDMA_TEST_MARK_FILE", file_.c_str(), 1);
  }
  ~ServerMapsMark() {
    ::unsetenv("ARDMA_TEST_MARK_PARENT");
    ::unsetenv("ARDMA_TEST_MARK_FILE");
    std::filesystem::remove(file_);
  }
  bool Mapped() const { return std::filesystem::exists(file_); }

 private:
  const std::string file_;
};

// With --isolate all, shipped native code never enters the server process: not to be loaded
// (the table comes from the trial load), not to run, and not when isolated code calls it by name
// from outside its own library (the code is sent to the caller's worker, which runs it). Before,
// the server mapped every new library after its trial, running its constructors.
TEST(SandboxTest, WithIsolateAllShippedCodeNeverEntersTheServerProcess) {
  ServerMapsMark mark;
  Isolated s;
  ASSERT_TRUE(s.Ready());
  ASSERT_TRUE(EnsureLoaded(*s.client, active_libraries::ctor_mark()).ok());
  EXPECT_FALSE(mark.Mapped());
  absl::StatusOr<std::string> echoed = s.client->Execute("ctor_mark.echo", "here");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "here");
  for (const char* function : {"ctor_mark.echo", "test.echo"}) {  // neither is hostile's own
    absl::StatusOr<std::string> called =
        s.client->Execute("hostile.call", absl::StrCat(function, std::string(1, '\0'), "there"));
    ASSERT_TRUE(called.ok()) << function << ": " << called.status();
    EXPECT_EQ(*called, "there");
  }
  EXPECT_FALSE(mark.Mapped());
  EXPECT_EQ(StatOf(*s.client, "isolated.restarts"), 0u);
  // A name nobody exports is still NOT_FOUND, from the server.
  absl::StatusOr<std::string> missing =
      s.client->Execute("hostile.call", std::string("nobody.here\0", 12));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(s.client->Ping().ok());
}

// With --isolate untrusted (an auth file), a library is mapped into the server only when a
// caller whose code runs there (an admin) first runs one of its functions.
TEST(SandboxTest, AnUntrustedServerMapsALibraryOnlyWhenAnAdminRunsIt) {
  ServerMapsMark mark;
  WithSecrets s("untrusted");
  ASSERT_FALSE(s.daemon.address().empty());
  auto writer = s.Connect("writer", 'w');
  auto boss = s.Connect("boss", 'b');
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(boss.ok()) << boss.status();
  ASSERT_TRUE(EnsureLoaded(**writer, active_libraries::ctor_mark()).ok());
  absl::StatusOr<std::string> isolated = (*writer)->Execute("ctor_mark.echo", "worker");
  ASSERT_TRUE(isolated.ok()) << isolated.status();
  EXPECT_EQ(*isolated, "worker");
  EXPECT_FALSE(mark.Mapped());
  absl::StatusOr<std::string> here = (*boss)->Execute("ctor_mark.echo", "server");
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_EQ(*here, "server");
  EXPECT_TRUE(mark.Mapped());
}

// A caller without the write permission has its code run in a worker that maps the heap
// read-only: writing through a pointer kills that worker, and the byte is unchanged. A caller
// with it may write the same byte.
TEST(SandboxTest, CodeOfAReadOnlyCallerCannotWriteTheHeapThroughAPointer) {
  WithSecrets s;
  ASSERT_FALSE(s.daemon.address().empty());
  auto connect = [&](const std::string& name, char fill) { return s.Connect(name, fill); };
  auto writer = connect("writer", 'w');
  auto reader = connect("reader", 'r');
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE(EnsureLoaded(**writer, active_libraries::hostile()).ok());
  RemoteContext ctx(writer->get(), {});
  absl::StatusOr<uint64_t> byte = heap::Allocate(ctx, 8);
  ASSERT_TRUE(byte.ok());
  ASSERT_TRUE(ctx.WriteU64(*byte, 0x40).ok());

  absl::StatusOr<std::string> denied = (*reader)->Execute("hostile.write_view", U64s({*byte}));
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kInternal) << denied.status();
  EXPECT_THAT(denied.status().message(), HasSubstr("Segmentation fault"));
  EXPECT_EQ(*ctx.ReadU64(*byte), 0x40u);

  // Nor by mapping its heap descriptor writable, or reopening it for writing.
  absl::StatusOr<std::string> mapped = (*reader)->Execute("hostile.map_heap", U64s({4}));
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kPermissionDenied) << mapped.status();
  EXPECT_THAT(mapped.status().message(), HasSubstr("forbidden system call: mmap"));
  absl::StatusOr<std::string> reopened = (*reader)->Execute("hostile.reopen_heap", U64s({4}));
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kPermissionDenied) << reopened.status();
  EXPECT_THAT(reopened.status().message(), HasSubstr("forbidden system call: openat"));
  EXPECT_EQ(*ctx.ReadU64(*byte), 0x40u);

  absl::StatusOr<std::string> allowed = (*writer)->Execute("hostile.write_view", U64s({*byte}));
  EXPECT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(*ctx.ReadU64(*byte), 0x41u);
}

// A close hook runs with the right to write of the connection that set it: a reader's hook cannot
// write what the reader could not (before, every close hook's worker mapped the heap writable).
TEST(SandboxTest, AReadersCloseHookCannotWriteEither) {
  WithSecrets s;
  ASSERT_FALSE(s.daemon.address().empty());
  auto connect = [&](const std::string& name, char fill) { return s.Connect(name, fill); };
  auto writer = connect("writer", 'w');
  auto admin = connect("admin", 'a');  // (for STATS)
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(admin.ok()) << admin.status();
  ASSERT_TRUE(EnsureLoaded(**writer, active_libraries::test()).ok());
  RemoteContext ctx(writer->get(), {});
  absl::StatusOr<uint64_t> counter = heap::Allocate(ctx, 8);
  ASSERT_TRUE(counter.ok());
  ASSERT_TRUE(ctx.WriteU64(*counter, 0).ok());
  // The reader's connection, then the writer's, sets a hook that adds 1 to the counter when it
  // closes, and closes. The hooks run in that order (one pool thread: --workers 1).
  for (auto [name, fill] : {std::pair{"reader", 'r'}, std::pair{"writer", 'w'}}) {
    uint64_t hooks_run = StatOf(**admin, "close_hooks.run");
    {
      auto c = connect(name, fill);
      ASSERT_TRUE(c.ok()) << c.status();
      absl::StatusOr<std::string> set = (*c)->Execute("test.add_on_close", U64s({*counter}));
      ASSERT_TRUE(set.ok()) << name << ": " << set.status();
    }
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return StatOf(**admin, "close_hooks.run") > hooks_run; }, absl::Seconds(10)));
  }
  // The writer's hook added 1; the reader's, run before it, added nothing.
  ASSERT_TRUE(testing::WaitUntil([&] { return *ctx.ReadU64(*counter) != 0; }, absl::Seconds(10)));
  EXPECT_EQ(*ctx.ReadU64(*counter), 1u);
}

// RLIMIT_CPU: a worker that has used half its CPU time is replaced after its answer; a call that
// uses the rest is RESOURCE_EXHAUSTED, and the next call gets a new worker.
TEST(SandboxTest, AWorkerRetiresAtHalfItsCpuLimitAndACallThatUsesItAllIsRefused) {
  Isolated s({"--isolate-cpu", "2"});
  ASSERT_TRUE(s.Ready());
  CallOptions slow{.timeout = absl::Seconds(60), .server_deadline = absl::Seconds(30)};
  // 0.3 s of wall time at a time: the worker retires after the call that takes it past 1 s of
  // CPU (how many calls that takes depends on the machine's load).
  int calls = 0;
  while (StatOf(*s.client, "isolated.retired") == 0 && calls < 40) {
    ASSERT_TRUE(s.client->Execute("test.busy", U64s({300}), slow).ok());
    ++calls;
  }
  EXPECT_EQ(StatOf(*s.client, "isolated.retired"), 1u);
  EXPECT_GE(calls, 4);  // not before a second of CPU
  EXPECT_EQ(StatOf(*s.client, "isolated.restarts"), 0u);
  absl::StatusOr<std::string> endless = s.client->Execute("test.busy", U64s({UINT64_MAX}), slow);
  EXPECT_EQ(endless.status().code(), absl::StatusCode::kResourceExhausted) << endless.status();
  EXPECT_THAT(endless.status().message(), HasSubstr("CPU time limit"));
  EXPECT_TRUE(s.client->Execute("test.echo", "x").ok());
}

// A worker that closes its channel and runs on is killed at once, not waited for: the call is
// answered and the pool thread freed. (Before: the server reaped it without killing it, and so
// waited for ever.)
TEST(SandboxTest, AWorkerThatHangsUpAndRunsOnIsKilled) {
  Isolated s;
  ASSERT_TRUE(s.Ready());
  absl::StatusOr<std::string> r = s.client->Execute(
      "hostile.hang_up", "", {.timeout = absl::Seconds(20), .server_deadline = absl::Seconds(10)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("crashed its isolated worker: killed by signal 9"));
  EXPECT_TRUE(s.client->Execute("test.echo", "x").ok());
  EXPECT_LE(Children(s.daemon.pid()).size(), 1u);
}

// A native worker's address space is the heap plus 4 GiB: a larger allocation fails in it.
TEST(SandboxTest, AnAllocationBeyondTheAddressSpaceLimitFails) {
  Isolated s;
  ASSERT_TRUE(s.Ready());
  absl::StatusOr<std::string> big = s.client->Execute("hostile.allocate", U64s({8ull << 30}));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_TRUE(s.client->Execute("hostile.allocate", U64s({64ull << 20})).ok());
}

// A thousand forbidden calls in a row: each costs a worker, none is left behind, and the server's
// descriptors and memory stay where they were.
TEST(SandboxTest, AThousandForbiddenCallsLeaveNoWorkerDescriptorOrMemoryBehind) {
  Isolated s;
  ASSERT_TRUE(s.Ready());
  // Warm: a worker has run both libraries' code and the server's allocations have settled.
  for (int i = 0; i < 20; ++i) {
    ASSERT_FALSE(s.client->Execute("hostile.socket", "").ok());
    ASSERT_TRUE(s.client->Execute("hostile.leak", "").ok());  // a worker keeps its own leak
  }
  const size_t fds = OpenDescriptors(s.daemon.pid());
  const int64_t rss = ResidentKib(s.daemon.pid());
  const uint64_t forbidden = StatOf(*s.client, "isolated.forbidden");
  constexpr int kCalls = 1000;
  for (int i = 0; i < kCalls; ++i) {
    absl::StatusOr<std::string> r = s.client->Execute("hostile.socket", "");
    ASSERT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << i << ": " << r.status();
  }
  EXPECT_EQ(StatOf(*s.client, "isolated.forbidden"), forbidden + kCalls);
  EXPECT_TRUE(s.client->Execute("test.echo", "x").ok());
  EXPECT_LE(Children(s.daemon.pid()).size(), 1u);  // --workers 1
  EXPECT_EQ(OpenDescriptors(s.daemon.pid()), fds);
  // A respawn costs the server no memory that stays: allow allocator noise, not 1,000 of anything.
  EXPECT_LT(ResidentKib(s.daemon.pid()) - rss, 8 * 1024) << "KiB before: " << rss;
}

}  // namespace
}  // namespace ardma
