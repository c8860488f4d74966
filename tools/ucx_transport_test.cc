// The UCX transport's promises that need the server in its own process, or clients of both
// transports at once. UCX runs over shared memory here (UCX_TLS=shm,self, set before any use), the
// server inheriting it.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/test_server.h"
#include "core/ucx/ucx_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::U64At;
using testing::U64s;

class UcxTransportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ::setenv("UCX_TLS", "shm,self", /*overwrite=*/1); }
  static std::string Ucx(const std::string& address) {
    return absl::StrCat(ToAbsl(kUcxPrefix), address);
  }
};

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Seed 002's point: one-sided access never needs the server's CPU. With ardmad stopped (SIGSTOP),
// READ, WRITE, CAS and FETCH_ADD still complete, one round trip each; an EXECUTE waits for it.
TEST_F(UcxTransportTest, OneSidedOperationsCompleteWhileTheServerIsStopped) {
  testing::ServerProcess server({"--memory", "64M"});
  ASSERT_FALSE(server.address().empty()) << "ardmad did not start";
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Ucx(server.address()));
  ASSERT_TRUE(client.ok()) << client.status();
  // The endpoint runs on shared-memory lanes, and atomics on the heap are one-sided.
  absl::StatusOr<std::string> lanes = (*client)->TransportDescription();
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  EXPECT_THAT(*lanes, HasSubstr("regions: 0=yes"));
  EXPECT_THAT(*lanes, AnyOf(HasSubstr("posix/"), HasSubstr("sysv/"), HasSubstr("cma/"))) << *lanes;
  std::string code = FileBytes(testing::BinDir() + "/../active/ardma_test2.so");
  ASSERT_FALSE(code.empty());
  ASSERT_TRUE((*client)->Load(wire::CodeKind::kNative, "", code).ok());

  RemoteContext ctx(client->get(), {});
  absl::StatusOr<uint64_t> addr_or = heap::Allocate(ctx, 4096);
  ASSERT_TRUE(addr_or.ok()) << addr_or.status();
  const uint64_t addr = *addr_or;
  ASSERT_TRUE(server.Freeze()) << "ardmad did not stop";
  uint64_t before = (*client)->counters().round_trips.load();
  ASSERT_TRUE((*client)->Write(addr, "written while stopped").ok());
  EXPECT_EQ(*(*client)->Read(addr, 21), "written while stopped");
  absl::StatusOr<CasResult> cas = (*client)->CompareAndSwap(addr + 64, 0, 40);
  ASSERT_TRUE(cas.ok()) << cas.status();
  EXPECT_TRUE(cas->swapped);
  EXPECT_EQ(*(*client)->FetchAdd(addr + 64, 2), 40u);
  EXPECT_EQ((*client)->counters().round_trips.load() - before, 4u);
  // An EXECUTE needs the server: it completes only once the server runs again.
  std::future<absl::StatusOr<std::string>> doubled =
      (*client)->ExecuteAsync("test2.double", U64s({21}));
  EXPECT_EQ(doubled.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  server.Signal(SIGCONT);
  absl::StatusOr<std::string> r = doubled.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(U64At(*r, 0), 42u);
  // What was written meanwhile is there for every client, over TCP too.
  absl::StatusOr<std::unique_ptr<Client>> tcp = Client::Connect(server.address());
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_EQ(*(*tcp)->Read(addr, 21), "written while stopped");
  EXPECT_EQ(*(*tcp)->FetchAdd(addr + 64, 0), 42u);
}

// With --memory-file the heap is the file's mapping, which UCX's shared-memory transports cannot
// map: WRITEs stay one-sided (CMA), CAS and FETCH_ADD go through the server (so they stay atomic
// with active code), and every acknowledged write survives SIGKILL.
TEST_F(UcxTransportTest, WithAMemoryFileAtomicsGoThroughTheServerAndWritesSurviveAKill) {
  std::string heap_file = testing::TempPath("ucx_heap");
  std::filesystem::remove(heap_file);
  uint64_t addr = 0;
  {
    testing::ServerProcess server({"--memory", "16M", "--memory-file", heap_file});
    ASSERT_FALSE(server.address().empty());
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Ucx(server.address()));
    ASSERT_TRUE(client.ok()) << client.status();
    RemoteContext ctx(client->get(), {});
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, 128);
    ASSERT_TRUE(block.ok()) << block.status();
    addr = *block;
    EXPECT_THAT(*(*client)->TransportDescription(), HasSubstr("regions: 0=no(server)"));
    auto stat = [&](const char* name) { return *testing::StatValue(**client, name); };
    uint64_t writes = stat("requests.write"), cas = stat("requests.cas"),
             adds = stat("requests.fetch_add");
    ASSERT_TRUE((*client)->Write(addr, "kept").ok());
    ASSERT_TRUE((*client)->CompareAndSwap(addr + 64, 0, 9)->swapped);
    EXPECT_EQ(*(*client)->FetchAdd(addr + 64, 1), 9u);
    EXPECT_EQ(stat("requests.write"), writes);
    EXPECT_EQ(stat("requests.cas"), cas + 1);
    EXPECT_EQ(stat("requests.fetch_add"), adds + 1);
    server.Kill(SIGKILL);
  }
  testing::ServerProcess again({"--memory-file", heap_file});
  ASSERT_FALSE(again.address().empty());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Ucx(again.address()));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(*(*client)->Read(addr, 4), "kept");
  EXPECT_EQ(*(*client)->FetchAdd(addr + 64, 0), 10u);
  again.Kill(SIGTERM);
  std::filesystem::remove(heap_file);
}

// A server that goes away is noticed before a one-sided write could land in its dead memory.
TEST_F(UcxTransportTest, AServerThatIsKilledFailsTheNextOperation) {
  testing::ServerProcess server({"--memory", "16M"});
  ASSERT_FALSE(server.address().empty());
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(Ucx(server.address()), {.connect_attempts = 1});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Write(heap::kDataStart, "x").ok());
  server.Kill(SIGKILL);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ((*client)->Write(heap::kDataStart, "y").code(), absl::StatusCode::kUnavailable);
}

// TCP and UCX clients on one counter: FETCH_ADD over UCX (a CPU atomic on the shared mapping) and
// over TCP (the server's CPU atomic) are atomic with respect to each other.
TEST_F(UcxTransportTest, TcpAndUcxClientsFetchAddOneCounterExactly) {
  testing::ServerProcess server({"--memory", "16M"});
  ASSERT_FALSE(server.address().empty());
  uint64_t counter = 0;
  {
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(server.address());
    ASSERT_TRUE(c.ok()) << c.status();
    RemoteContext ctx(c->get(), {});
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, 8);
    ASSERT_TRUE(block.ok()) << block.status();
    counter = *block;
  }
  constexpr int kThreads = 4, kAdds = 3000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string address = t % 2 == 0 ? Ucx(server.address()) : server.address();
      absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(address);
      ASSERT_TRUE(c.ok()) << c.status();
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE((*c)->FetchAdd(counter, 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(server.address());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*(*c)->FetchAdd(counter, 0), static_cast<uint64_t>(kThreads * kAdds));
}

// A UCX client that goes away leaves nothing behind: its session closes, its parked request goes.
TEST_F(UcxTransportTest, AVanishedClientLeavesNoSessionOrParkedRequestBehind) {
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE((*server)->server().ucx(), nullptr);
  absl::StatusOr<std::unique_ptr<Client>> watcher = Client::Connect((*server)->address());
  ASSERT_TRUE(watcher.ok());
  {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Ucx((*server)->address()));
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE(EnsureLoaded(**client, active_libraries::test()).ok());
    std::future<absl::StatusOr<std::string>> parked = (*client)->ExecuteAsync("test.park", "k");
    for (int i = 0; i < 5000 && *testing::StatValue(**watcher, "parked.now") < 1; ++i) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ(*testing::StatValue(**watcher, "parked.now"), 1u);
    EXPECT_EQ((*server)->server().ucx()->sessions(), 1u);
  }
  for (int i = 0; i < 500 && ((*server)->server().ucx()->sessions() > 0 ||
                              *testing::StatValue(**watcher, "parked.now") > 0);
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ((*server)->server().ucx()->sessions(), 0u);
  EXPECT_EQ(*testing::StatValue(**watcher, "parked.now"), 0u);
}

// A server without UCX says so at once, instead of being retried as unreachable.
TEST_F(UcxTransportTest, AServerWithoutUcxRefusesClearly) {
  ServerOptions options = testing::TestServerOptions();
  options.ucx = ServerOptions::Ucx::kOff;
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Ucx((*server)->address()));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("does not offer UCX"));
}

}  // namespace
}  // namespace ardma
