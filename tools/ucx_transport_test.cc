// The UCX transport's promises that need the server in its own process, or clients of both
// transports at once. UCX runs over shared memory here (UCX_TLS=shm,self, set before any use), the
// server inheriting it.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/client/ucx_connection.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/testing/raw_socket.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "core/ucx/ucx_context.h"
#include "core/wire/messages.h"
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

// The RDMA load-monitoring paper's point: one-sided access never needs the server's CPU. With
// ardmad stopped (SIGSTOP), READ, WRITE, CAS and FETCH_ADD still complete, one round trip each; an
// EXECUTE waits for it.
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
  // The client notices the bootstrap connection's close (its watcher) and breaks the transport.
  EXPECT_TRUE(testing::WaitUntil([&] {
    return (*client)->Write(heap::kDataStart, "y").code() == absl::StatusCode::kUnavailable;
  }));
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

// The CPU time all of process `pid`'s threads have had (the kernel's schedstat), in seconds.
double ProcessCpuSeconds(pid_t pid) {
  double total = 0;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(task.path() / "schedstat");
    uint64_t ns = 0;
    if (in >> ns) total += static_cast<double>(ns) / 1e9;
  }
  return total;
}

// An idle server wakes for nothing (issue 37): with 50 connections open and idle, 25 over TCP
// and 25 over UCX, its threads use under 0.2% of a core over 10 s. A bound on resources from the
// kernel's accounting, not a timing of this machine: the 10 s are the window measured. (With a
// 20 ms parking-lot tick and a 50 ms session sweep it used 0.3% to 0.5%; the issue allows 1%.)
TEST_F(UcxTransportTest, AnIdleServerWithFiftyConnectionsUsesAlmostNoCpu) {
  testing::ServerProcess server({"--memory", "16M"});
  ASSERT_FALSE(server.address().empty()) << "ardmad did not start";
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<std::unique_ptr<Client>> c =
        Client::Connect(i % 2 == 0 ? Ucx(server.address()) : server.address());
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Ping().ok());
    clients.push_back(*std::move(c));
  }
  constexpr absl::Duration kWindow = absl::Seconds(10);
  double before = ProcessCpuSeconds(server.pid());
  absl::SleepFor(kWindow);  // (the measurement window itself: nothing to wait for)
  double used = ProcessCpuSeconds(server.pid()) - before;
  EXPECT_LT(used, 0.002 * absl::ToDoubleSeconds(kWindow))
      << used << " s of CPU in " << kWindow << " idle";
  for (auto& c : clients) EXPECT_TRUE(c->Ping().ok());  // all still served
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
    testing::WaitUntil([&] { return *testing::StatValue(**watcher, "parked.now") >= 1; });
    ASSERT_EQ(*testing::StatValue(**watcher, "parked.now"), 1u);
    EXPECT_EQ((*server)->server().ucx()->sessions(), 1u);
  }
  testing::WaitUntil([&] {
    return (*server)->server().ucx()->sessions() == 0 &&
           *testing::StatValue(**watcher, "parked.now") == 0;
  });
  EXPECT_EQ((*server)->server().ucx()->sessions(), 0u);
  EXPECT_EQ(*testing::StatValue(**watcher, "parked.now"), 0u);
}

// A session the server closes for a bad message ends its bootstrap connection too, so the client
// hears of it at once and its next call reconnects — as over TCP, where an oversized frame gets
// an error and a close (issue 32, UCX 2: the session became a zombie, every later call waited out
// its deadline and the client never reconnected).
TEST_F(UcxTransportTest, APoisonedSessionEndsAndTheClientReconnects) {
  testing::ServerProcess server({"--memory", "16M", "--max-frame", "4K"});
  ASSERT_FALSE(server.address().empty()) << "ardmad did not start";
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(Ucx(server.address()));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Ping().ok());
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> big =
      (*client)->Execute("nobody.here", std::string(16 << 10, 'x'), {.timeout = absl::Seconds(20)});
  // Answered as over TCP (the frame is too large), or the close was seen first.
  EXPECT_THAT(big.status().code(),
              AnyOf(absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnavailable))
      << big.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the call waited for its deadline";
  EXPECT_TRUE((*client)->Ping().ok());
  EXPECT_GE((*client)->counters().reconnects.load(), 1u);
}

// A one-sided WRITE over UCX that failed is not sent again on a new connection: it may have
// landed before the failure, and the server, which never saw it, could not recognise the retry
// (issue 32, UCX 3: it was retried, so it could land over newer data). Client::Flight retries a
// flight only if its transport says the server de-duplicates every request in it: over TCP a
// WRITE is (the server de-duplicates it), over UCX a one-sided WRITE is not, while a WRITE to a
// region without a key (sent to the server) and an EXECUTE are.
TEST_F(UcxTransportTest, OneSidedWritesAreNotRetried) {
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  wire::WireLimits limits;
  ClientCounters counters;
  std::string encoded_write, execute;
  wire::WriteEntry entry{0, heap::kDataStart, "data"};
  // A WRITE as a Client makes it: as values, which UCX puts one-sidedly.
  OutgoingRequest write{wire::Op::kWrite, {}, OutgoingRequest::Writes{entry}};
  wire::EncodeWriteRequest({&entry, 1}, &encoded_write);
  wire::EncodeExecuteRequest({.function = "test.noop"}, &execute);
  absl::StatusOr<std::shared_ptr<UcxConnection>> ucx =
      UcxConnection::Open((*server)->address(), absl::Seconds(5), limits, &counters);
  ASSERT_TRUE(ucx.ok()) << ucx.status();
  EXPECT_FALSE((*ucx)->Deduplicated(write));
  EXPECT_TRUE((*ucx)->Deduplicated({wire::Op::kExecute, execute}));
  // An encoded one goes to the server, which recognises a retry.
  EXPECT_TRUE((*ucx)->Deduplicated({wire::Op::kWrite, encoded_write}));
  absl::StatusOr<std::shared_ptr<Connection>> tcp =
      Connection::Open((*server)->address(), absl::Seconds(5), limits, &counters);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_TRUE((*tcp)->Deduplicated(write));
  (*ucx)->Close();
  (*tcp)->Close();
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

// A hostile client cannot end the server through UCX (issue 32, A: one UCX_CONNECT with a malformed
// worker address made UCX assert, ending ardmad; 17 of 20 random addresses did). 1,000 UCX_CONNECT
// payloads — random bytes, random "addresses", and a real worker address with bytes flipped, cut
// or lengthened — each get an answer (an address that unpacks gets a session, one that does not
// INVALID_ARGUMENT); every fifth is a real address, after which the session sends mangled frames
// as active messages: bytes flipped, lengths wrong, random bytes, the wrong session number. A
// session that sent a malformed frame is closed with its bootstrap connection. The server
// survives them all and serves a second client throughout, over each UCX transport (250 payloads
// over tcp: there some mangled addresses take UCX seconds to give up on).
class UcxHostileClientTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ::setenv("UCX_TLS", GetParam().c_str(), /*overwrite=*/1); }
  static ucs_status_t Ignore(void*, const void*, size_t, void*, size_t,
                             const ucp_am_recv_param_t*) {
    return UCS_OK;
  }
};

TEST_P(UcxHostileClientTest, MalformedConnectsAndFramesLeaveTheServerServing) {
  testing::ServerProcess server({"--memory", "16M"});
  ASSERT_FALSE(server.address().empty()) << "ardmad did not start";
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(server.address().substr(server.address().rfind(':') + 1)));
  absl::StatusOr<std::unique_ptr<Client>> second =
      Client::Connect(absl::StrCat(ToAbsl(kUcxPrefix), server.address()));
  ASSERT_TRUE(second.ok()) << second.status();
  RemoteContext ctx(second->get(), {});
  absl::StatusOr<uint64_t> addr = heap::Allocate(ctx, 64);
  ASSERT_TRUE(addr.ok()) << addr.status();
  ASSERT_TRUE((*second)->Write(*addr, "still here").ok());

  // The worker whose address is mangled; each valid session has a worker of its own.
  absl::StatusOr<std::unique_ptr<UcxContext>> victim = UcxContext::Create({});
  ASSERT_TRUE(victim.ok()) << victim.status();
  absl::StatusOr<std::string> real_address = (*victim)->WorkerAddress();
  ASSERT_TRUE(real_address.ok());

  std::mt19937_64 rng(20261125);
  auto random_bytes = [&](size_t n) {
    std::string out(n, '\0');
    for (char& c : out) c = static_cast<char>(rng());
    return out;
  };
  auto flip = [&](std::string bytes, int flips) {
    for (int k = 0; k < flips && !bytes.empty(); ++k) {
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    return bytes;
  };
  auto bytes32 = [](std::string_view data) {
    std::string out;
    wire::EncodeUcxConnectRequest({.worker_address = data}, &out);
    return out;
  };
  std::string ping;
  size_t start = wire::BeginFrame(&ping);
  ping.append("ping");
  wire::FinishFrame({.op = wire::Op::kPing, .request_id = 9, .client_id = 3}, start, &ping);

  const int kConnects = GetParam().starts_with("shm") ? 1000 : 250;
  int answered = 0, refused = 0, sessions = 0, frames = 0;
  absl::Duration slowest;
  for (int i = 0; i < kConnects; ++i) {
    std::string payload;
    switch (i % 5) {
      case 0:
        payload = i % 2 ? random_bytes(rng() % 400) : bytes32(random_bytes(1 + rng() % 400));
        break;
      case 1:
        payload = bytes32(flip(*real_address, 1 + rng() % 8));
        break;
      case 2:
        payload = bytes32(real_address->substr(0, 1 + rng() % (real_address->size() - 1)));
        break;
      case 3:
        payload = bytes32(*real_address + random_bytes(1 + rng() % 64));
        break;
      case 4:
        break;  // a real address; mangled frames follow on its session
    }
    std::unique_ptr<UcxContext> ucx;
    if (i % 5 == 4) {
      absl::StatusOr<std::unique_ptr<UcxContext>> own = UcxContext::Create({});
      ASSERT_TRUE(own.ok()) << own.status();
      ucx = *std::move(own);
      ASSERT_TRUE(ucx->SetAmHandler(kAmResponse, &Ignore, nullptr).ok());  // answers to PINGs
      payload = bytes32(*ucx->WorkerAddress());
    }
    testing::RawSocket socket(port);
    ASSERT_TRUE(socket.ok()) << "connection " << i << " refused: the server is gone";
    // An address that hangs the checker is refused after its 4 s limit (ucx_address_check.cc):
    // the answer may take that long, and longer on a loaded machine.
    socket.SetReceiveTimeout(20);
    ASSERT_TRUE(socket.SendFrame(wire::Op::kUcxConnect, payload, 1, 0));
    absl::Time asked = absl::Now();
    std::optional<testing::RawResponse> answer = socket.Receive();
    ASSERT_TRUE(answer.has_value()) << "no answer to UCX_CONNECT " << i;
    slowest = std::max(slowest, absl::Now() - asked);
    ++answered;
    if (answer->header.status != 0) {
      // Refused as malformed, or an endpoint to what it names could not be made.
      EXPECT_TRUE(answer->header.status ==
                      static_cast<uint16_t>(absl::StatusCode::kInvalidArgument) ||
                  answer->header.status == static_cast<uint16_t>(absl::StatusCode::kUnavailable))
          << answer->header.status << " " << answer->payload;
      EXPECT_NE(i % 5, 4) << "a real address was refused: " << answer->payload;
      ++refused;
      continue;
    }
    if (i % 5 != 4) continue;  // a mangled address that still unpacks: its session just ends
    absl::StatusOr<wire::UcxHello> hello = wire::DecodeUcxHello(answer->payload);
    ASSERT_TRUE(hello.ok()) << hello.status();
    absl::StatusOr<ucp_ep_h> ep =
        ucx->Connect(hello->worker_address, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(ep.ok()) << ep.status();
    ++sessions;
    for (int k = 0; k < 5; ++k, ++frames) {
      std::string frame = ping;
      uint64_t session = hello->session;
      switch ((i / 5 + k) % 5) {
        case 0:
          frame = flip(frame, 1 + rng() % 4);
          break;
        case 1:
          frame = frame.substr(0, rng() % frame.size());
          break;
        case 2:
          frame += random_bytes(1 + rng() % 64);
          break;
        case 3:
          session ^= 1 + rng();
          break;
        case 4:
          frame = random_bytes(rng() % 128);
          break;
      }
      ASSERT_TRUE(SendActiveMessage(*ep, kAmRequest, session, frame).ok());
    }
    // A poisoned session ends its bootstrap connection, as a TCP connection is closed for a
    // malformed frame (issue 32, UCX 2: it stayed open, and every later call waited out its
    // deadline).
    bool closed = false;
    for (absl::Time until = absl::Now() + absl::Seconds(5); !closed && absl::Now() < until;) {
      ucp_worker_progress(ucx->worker());
      closed = socket.ClosedNow();
    }
    EXPECT_TRUE(closed) << "session " << i << " stayed open";
    ucx->CloseEndpoint(*ep, absl::Milliseconds(50));
    if (i % 50 == 4) {
      absl::StatusOr<std::string> read = (*second)->Read(*addr, 10);
      ASSERT_TRUE(read.ok()) << "after " << i << " connects: " << read.status();
      EXPECT_EQ(*read, "still here");
    }
  }
  EXPECT_EQ(answered, kConnects);
  EXPECT_EQ(sessions, kConnects / 5);
  EXPECT_EQ(frames, kConnects);
  EXPECT_GE(refused, 2 * kConnects / 5) << "few malformed addresses were refused";
  std::cout << refused << " of " << kConnects << " UCX_CONNECTs refused; the slowest answer took "
            << slowest << "\n";
  int status = 0;
  ASSERT_EQ(::waitpid(server.pid(), &status, WNOHANG), 0) << "ardmad ended, status " << status;
  EXPECT_TRUE((*second)->Ping().ok());
  EXPECT_EQ(*(*second)->Read(*addr, 10), "still here");
  absl::StatusOr<std::unique_ptr<Client>> third =
      Client::Connect(absl::StrCat(ToAbsl(kUcxPrefix), server.address()));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(*(*third)->Read(*addr, 10), "still here");
}

// The UCX transports each parameterised suite here runs over: shared memory, and UCX's tcp.
const auto kUcxTransports = ::testing::Values("shm,self", "tcp,self");
std::string UcxTransportName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param.starts_with("shm") ? "shm" : "tcp";
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxHostileClientTest, kUcxTransports, UcxTransportName);

class UcxProgressThreadsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ::setenv("UCX_TLS", GetParam().c_str(), /*overwrite=*/1); }
};

// As TCP connections are spread over the I/O threads, UCX sessions are spread over the progress
// threads (one per --io-threads), and one stuck in a long function gets no new session; the other
// serves its sessions meanwhile.
TEST_P(UcxProgressThreadsTest, SessionsSpreadOverThreadsAndAStuckThreadGetsNoNewOne) {
  ServerOptions options = testing::TestServerOptions();
  options.io_threads = 2;
  options.handler.workers = 0;  // every EXECUTE runs on its session's progress thread
  options.ucx = ServerOptions::Ucx::kOn;
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  UcxServer& ucx = *(*server)->server().ucx();
  ASSERT_EQ(ucx.threads().size(), 2u);
  const std::string address = absl::StrCat(ToAbsl(kUcxPrefix), (*server)->address());
  // Connects a client and says which thread its session went to.
  auto connect = [&](size_t* thread) -> std::unique_ptr<Client> {
    std::vector<UcxServer::ThreadLoad> before = ucx.threads();
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address);
    if (!client.ok()) return nullptr;
    std::vector<UcxServer::ThreadLoad> after = ucx.threads();
    for (size_t i = 0; i < after.size(); ++i) {
      if (after[i].sessions == before[i].sessions + 1) *thread = i;
    }
    return *std::move(client);
  };
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<size_t> thread_of;
  for (int i = 0; i < 4; ++i) {
    size_t thread = 9;
    clients.push_back(connect(&thread));
    ASSERT_NE(clients.back(), nullptr);
    thread_of.push_back(thread);
  }
  EXPECT_EQ(ucx.threads()[0].sessions, 2u);
  EXPECT_EQ(ucx.threads()[1].sessions, 2u);

  ASSERT_TRUE(EnsureLoaded(*clients[0], active_libraries::test()).ok());
  RemoteContext ctx(clients[0].get(), {});
  absl::StatusOr<uint64_t> word = heap::Allocate(ctx, 8);
  ASSERT_TRUE(word.ok()) << word.status();
  ASSERT_TRUE(clients[0]->Write(*word, U64s({1})).ok());
  // Client 0's thread runs a function that waits until the word is cleared.
  const size_t stuck = thread_of[0], other = 1 - stuck;
  std::future<absl::StatusOr<std::string>> waiter =
      clients[0]->ExecuteAsync("test.wait_zero", U64s({*word, 1'000'000}));
  testing::WaitUntil([&] { return ucx.threads()[stuck].stuck; });
  EXPECT_FALSE(ucx.threads()[other].stuck);
  for (int i = 0; i < 4; ++i) {
    size_t thread = 9;
    clients.push_back(connect(&thread));
    ASSERT_NE(clients.back(), nullptr);
    EXPECT_EQ(thread, other) << "new session " << i;
  }
  // The other thread's sessions, old and new, are served while the stuck one waits; one of them
  // clears the word (over UCX's tcp a one-sided write needs the target thread's progress).
  Client* helper = nullptr;
  for (size_t i = 0; i < thread_of.size(); ++i) {
    if (thread_of[i] == other) helper = clients[i].get();
  }
  ASSERT_NE(helper, nullptr);
  EXPECT_TRUE(helper->Ping().ok());
  EXPECT_TRUE(clients.back()->Execute("test.sleep", U64s({0})).ok());
  EXPECT_EQ(waiter.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  ASSERT_TRUE(helper->Write(*word, U64s({0})).ok());
  absl::StatusOr<std::string> waited = waiter.get();
  EXPECT_TRUE(waited.ok()) << waited.status();
  testing::WaitUntil([&] { return !ucx.threads()[stuck].stuck; });
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxProgressThreadsTest, kUcxTransports, UcxTransportName);

class UcxEndpointTest : public UcxProgressThreadsTest {};

// Endpoints are made with peer error handling where the transport offers it (UCX's tcp; issue 32,
// UCX 5: none had it, so on such lanes a dead peer could leave operations hanging), and without it
// where it does not (UCX 1.13's shared memory), working either way.
TEST_P(UcxEndpointTest, PeerErrorHandlingWhereTheTransportOffersIt) {
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  wire::WireLimits limits;
  ClientCounters counters;
  absl::StatusOr<std::shared_ptr<UcxConnection>> ucx =
      UcxConnection::Open((*server)->address(), absl::Seconds(5), limits, &counters);
  ASSERT_TRUE(ucx.ok()) << ucx.status();
  EXPECT_EQ((*ucx)->HandlesPeerFailure(), GetParam().starts_with("tcp"));
  // UCX's keepalive lane: it only comes with peer error handling.
  EXPECT_EQ((*ucx)->EndpointInfo().find("keepalive") != std::string::npos,
            GetParam().starts_with("tcp"))
      << (*ucx)->EndpointInfo();
  absl::StatusOr<std::string> ping =
      (*ucx)->RoundTripOne({wire::Op::kPing, "p"}, 1, 1, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(ping.ok()) << ping.status();
  (*ucx)->Close();
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxEndpointTest, kUcxTransports, UcxTransportName);

class UcxLimitsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ::setenv("UCX_TLS", GetParam().c_str(), /*overwrite=*/1); }

  // A server with UCX and `limits`, and a client of it with the test library loaded.
  void Start(const wire::WireLimits& limits) {
    ServerOptions options = testing::TestServerOptions();
    options.ucx = ServerOptions::Ucx::kOn;
    options.handler.limits = limits;
    options.handler.workers = 4;
    absl::StatusOr<std::unique_ptr<testing::TestServer>> server =
        testing::TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(absl::StrCat(ToAbsl(kUcxPrefix), server_->address()));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  }
  uint64_t Stat(const char* name) { return testing::StatValue(*client_, name).value_or(~0ull); }

  // A UCX session of this test's own, which sends what it likes and takes answers only when
  // Progress is called (counting them).
  struct RawSession {
    std::unique_ptr<UcxContext> ucx;
    std::unique_ptr<testing::RawSocket> socket;
    wire::UcxHello hello;
    ucp_ep_h ep = nullptr;
    std::atomic<int> answers{0};

    void Send(wire::Op op, std::string_view payload, uint64_t id) {
      std::string frame;
      size_t start = wire::BeginFrame(&frame);
      frame.append(payload);
      wire::FinishFrame({.op = op, .request_id = id, .client_id = 7}, start, &frame);
      ASSERT_TRUE(SendActiveMessage(ep, kAmRequest, hello.session, frame).ok());
    }
    void Progress() { ucp_worker_progress(ucx->worker()); }
    ~RawSession() {
      if (ep != nullptr) ucx->CloseEndpoint(ep, absl::Milliseconds(50));
    }
  };
  static ucs_status_t Count(void* arg, const void*, size_t, void*, size_t,
                            const ucp_am_recv_param_t*) {
    static_cast<RawSession*>(arg)->answers.fetch_add(1);
    return UCS_OK;
  }
  void OpenRaw(RawSession* raw) {
    absl::StatusOr<std::unique_ptr<UcxContext>> ucx = UcxContext::Create({});
    ASSERT_TRUE(ucx.ok()) << ucx.status();
    raw->ucx = *std::move(ucx);
    ASSERT_TRUE(raw->ucx->SetAmHandler(kAmResponse, &Count, raw).ok());
    const std::string& address = server_->address();
    raw->socket = std::make_unique<testing::RawSocket>(
        static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
    ASSERT_TRUE(raw->socket->ok());
    std::string connect;
    // Without peer error handling, as its endpoint is made below (both ends must agree).
    wire::EncodeUcxConnectRequest({.worker_address = *raw->ucx->WorkerAddress()}, &connect);
    ASSERT_TRUE(raw->socket->SendFrame(wire::Op::kUcxConnect, connect, 1, 0));
    std::optional<testing::RawResponse> answer = raw->socket->Receive();
    ASSERT_TRUE(answer.has_value());
    ASSERT_EQ(answer->header.status, 0) << answer->payload;
    absl::StatusOr<wire::UcxHello> hello = wire::DecodeUcxHello(answer->payload);
    ASSERT_TRUE(hello.ok()) << hello.status();
    raw->hello = *std::move(hello);
    absl::StatusOr<ucp_ep_h> ep =
        raw->ucx->Connect(raw->hello.worker_address, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(ep.ok()) << ep.status();
    raw->ep = *ep;
  }

  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<Client> client_;
};

// --max-inflight over UCX, as over TCP (issue 32, UCX 4: UCX sessions had no limit). The server
// announces it in the UCX_CONNECT answer and a client keeps within it: 16 asynchronous and 8
// synchronous concurrent calls on one connection with a limit of 4 all succeed, and the server
// never has to hold one back. A client that ignores it has up to 4 more held, and is closed with
// the next; other clients go on.
TEST_P(UcxLimitsTest, AClientKeepsWithinTheLimitAndOneThatFloodsIsClosed) {
  wire::WireLimits limits;
  limits.max_inflight_per_connection = 4;
  ASSERT_NO_FATAL_FAILURE(Start(limits));
  std::vector<std::future<absl::StatusOr<std::string>>> calls;
  for (int i = 0; i < 16; ++i) calls.push_back(client_->ExecuteAsync("test.sleep", U64s({20})));
  std::vector<std::thread> threads;
  std::atomic<int> sync_ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      if (client_->Execute("test.sleep", U64s({5})).ok()) ++sync_ok;
    });
  }
  for (auto& call : calls) EXPECT_TRUE(call.get().ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(sync_ok.load(), 8);
  EXPECT_GT(client_->counters().window_waits.load(), 0u);
  // One flight of 10 requests for the server: sent in parts of 4.
  wire::WireLimits client_limits;
  ClientCounters counters;
  absl::StatusOr<std::shared_ptr<UcxConnection>> ucx =
      UcxConnection::Open(server_->address(), absl::Seconds(5), client_limits, &counters);
  ASSERT_TRUE(ucx.ok()) << ucx.status();
  std::string sleep;
  const std::string args = U64s({5});
  wire::EncodeExecuteRequest({.function = "test.sleep", .args = args}, &sleep);
  std::vector<OutgoingRequest> flight(10, OutgoingRequest{wire::Op::kExecute, sleep});
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= flight.size(); ++id) ids.push_back(id);
  std::vector<ResponsePayload> answers(flight.size());
  LazyDeadline deadline = LazyDeadline::After(absl::Seconds(30));
  absl::Status sent = (*ucx)->RoundTrip(flight, ids, 5, deadline, absl::MakeSpan(answers));
  ASSERT_TRUE(sent.ok()) << sent;
  for (const ResponsePayload& answer : answers) EXPECT_TRUE(answer.ok()) << answer.status();
  (*ucx)->Close();
  EXPECT_EQ(Stat("ucx.held"), 0u);
  EXPECT_EQ(Stat("ucx.overruns"), 0u);

  // A session that sends 9 requests that park (never answered): 4 in flight, 4 held, then closed.
  RawSession raw;
  ASSERT_NO_FATAL_FAILURE(OpenRaw(&raw));
  EXPECT_EQ(raw.hello.max_inflight, 4u);
  std::string park;
  wire::EncodeExecuteRequest({.function = "test.park", .args = "flood"}, &park);
  for (uint64_t id = 1; id <= 9; ++id) raw.Send(wire::Op::kExecute, park, id);
  testing::WaitUntil([&] {
    raw.Progress();
    return raw.socket->ClosedNow();
  });
  EXPECT_TRUE(raw.socket->ClosedNow()) << "the flooding session stayed open";
  EXPECT_EQ(Stat("ucx.held"), 4u);
  EXPECT_EQ(Stat("ucx.overruns"), 1u);
  EXPECT_TRUE(client_->Execute("test.sleep", U64s({0})).ok());
}

// --max-queued over UCX: a session whose client does not take its answers (its worker does not
// progress, so UCX keeps them) is answered up to the limit, then what it asks is held — not
// answered into memory without bound — and handled as the client takes the answers.
TEST_P(UcxLimitsTest, AnswersAClientDoesNotTakeAreBoundedAndResumeWhenItDoes) {
  constexpr uint32_t kAnswer = 256 << 10;
  constexpr int kRequests = 80;  // 20 MiB of answers: more than loopback TCP's socket buffers
  wire::WireLimits limits;
  limits.max_queued_bytes_per_connection = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(Start(limits));
  RawSession raw;
  ASSERT_NO_FATAL_FAILURE(OpenRaw(&raw));
  std::string read;
  wire::ReadEntry entry{.region = 0, .addr = heap::kDataStart, .len = kAnswer};
  wire::EncodeReadRequest({&entry, 1}, &read);
  for (uint64_t id = 1; id <= kRequests; ++id) raw.Send(wire::Op::kRead, read, id);
  testing::WaitUntil([&] { return Stat("ucx.held") > 0; });
  ASSERT_GT(Stat("ucx.held"), 0u);
  // At most one answer past the limit is queued (checked before each request is handled).
  EXPECT_LE(Stat("connections.queued_bytes"), (1u << 20) + kAnswer + 64);
  testing::WaitUntil([&] {
    raw.Progress();
    return raw.answers.load() == kRequests;
  });
  EXPECT_EQ(raw.answers.load(), kRequests)
      << Stat("connections.queued_bytes") << " queued, " << Stat("ucx.held") << " held";
  EXPECT_EQ(Stat("ucx.overruns"), 0u);
  EXPECT_FALSE(raw.socket->ClosedNow());
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxLimitsTest, kUcxTransports, UcxTransportName);

}  // namespace
}  // namespace ardma
