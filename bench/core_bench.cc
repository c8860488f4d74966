// Core latency benchmarks: every op of the protocol against an in-process ardmad on 127.0.0.1:0,
// beside a raw TCP ping-pong (blocking send/recv against an echo thread) of the same sizes in the
// same binary: the floor on this machine. Each benchmark thread has its own connection, so
// ->Threads(n) measures n concurrent connections.
//
// Counters: round_trips/op and bytes/op (request + response bytes on the wire, headers included),
// taken from the client's own counters.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/active/native_loader.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/memory/heap.h"
#include "core/security/auth.h"
#include "core/server/request_handler.h"
#include "core/server/server.h"
#include "core/status_macros.h"
#include "core/testing/test_certificates.h"
#include "core/ucx/ucx_context.h"
#include "core/wire/frame.h"

namespace ardma {
namespace {

constexpr uint64_t kBenchAddr = heap::kDataStart + (1 << 20);

using bench::NewClient;
using bench::ReportCounters;
using bench::RunClientBenchmark;
using bench::SharedServer;
using bench::Transport;

void BM_RawTcpPingPong(benchmark::State& state) {
  bench::RunRawTcpPingPong(state, static_cast<size_t>(state.range(0)));
}
// Sizes matched to the ops' bytes/op: 32 each way = a PING (64 B); 58 each way = a no-op EXECUTE
// (84 B request + 32 B response = 116 B); 2090 each way = a READ of 4 KiB (4180 B).
BENCHMARK(BM_RawTcpPingPong)->Arg(32)->Arg(58)->Arg(2090)->Threads(1)->Threads(4)->UseRealTime();

// --- ardmad ops. ---

void BM_Ping(benchmark::State& state) {
  RunClientBenchmark(state, [](Client& c) { return c.Ping().ok(); });
}
BENCHMARK(BM_Ping)->Threads(1)->Threads(4)->UseRealTime();

// Same-host clients over the server's --unix-socket.
void BM_PingUnix(benchmark::State& state) {
  RunClientBenchmark(
      state, [](Client& c) { return c.Ping().ok(); }, Transport::kUnix);
}
BENCHMARK(BM_PingUnix)->Threads(1)->UseRealTime();

void BM_Read(benchmark::State& state) {
  uint32_t len = static_cast<uint32_t>(state.range(0));
  RunClientBenchmark(state, [len](Client& c) { return c.Read(kBenchAddr, len).ok(); });
}
BENCHMARK(BM_Read)->Arg(8)->Arg(4096)->Threads(1)->Threads(4)->UseRealTime();

void BM_Write(benchmark::State& state) {
  std::string data(static_cast<size_t>(state.range(0)), 'w');
  RunClientBenchmark(state, [&data](Client& c) { return c.Write(kBenchAddr, data).ok(); });
}
BENCHMARK(BM_Write)->Arg(8)->Arg(4096)->Threads(1)->Threads(4)->UseRealTime();

void BM_Cas(benchmark::State& state) {
  uint64_t addr = kBenchAddr + 4096 + 8 * static_cast<uint64_t>(state.thread_index());
  RunClientBenchmark(state, [addr](Client& c) { return c.CompareAndSwap(addr, 0, 0).ok(); });
}
BENCHMARK(BM_Cas)->Threads(1)->Threads(4)->UseRealTime();

void BM_FetchAdd(benchmark::State& state) {
  RunClientBenchmark(state, [](Client& c) { return c.FetchAdd(kBenchAddr + 8192, 1).ok(); });
}
BENCHMARK(BM_FetchAdd)->Threads(1)->Threads(4)->UseRealTime();

void ExecuteNoop(benchmark::State& state, Transport transport) {
  std::unique_ptr<Client> client = NewClient(state, transport);
  if (client == nullptr) return;
  const ActiveLibrary& test = active_libraries::test();
  if (!EnsureLoaded(*client, test).ok()) {
    state.SkipWithError("cannot load the test library");
    return;
  }
  // Warm up: the server runs a function inline once it has seen that it is short.
  for (int i = 0; i < 10; ++i) (void)client->Execute(test.hash(), "test.noop", "");
  ServerCounters& server = SharedServer().handler().counters();
  uint64_t inline0 = server.Get(Stat::kExecutesInline);
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  for (auto _ : state) {
    if (!client->Execute(test.hash(), "test.noop", "").ok()) {
      state.SkipWithError("EXECUTE failed");
      break;
    }
  }
  ReportCounters(state, *client, rt0, bytes0);
  // Share of EXECUTEs the server ran on its I/O thread (all threads' calls count here).
  state.counters["inline/op"] =
      benchmark::Counter(static_cast<double>(server.Get(Stat::kExecutesInline) - inline0) /
                             static_cast<double>(state.iterations() * state.threads()),
                         benchmark::Counter::kAvgThreads);
}
void BM_ExecuteNoop(benchmark::State& state) { ExecuteNoop(state, Transport::kTcp); }
BENCHMARK(BM_ExecuteNoop)->Threads(1)->Threads(4)->UseRealTime();

// The server's own cost of a request: RequestHandler::Handle called on this thread with a
// connection that drops the answer, so no transport and no client is in the figure. PING against
// a no-op EXECUTE (by hash, as the client sends it; run inline after the warm-up, as in ardmad).
void HandlerRequest(benchmark::State& state, wire::Op op) {
  bench::HandlerHarness harness;
  const ActiveLibrary& test = active_libraries::test();
  if (!harness.Load(state, test)) return;
  std::string payload;
  if (op == wire::Op::kExecute) {
    wire::EncodeExecuteRequest({.by_hash = true, .hash = test.hash(), .function = "test.noop"},
                               &payload);
  }
  for (int i = 0; i < 10; ++i) harness.Handle(op, payload);  // EXECUTE: next runs inline
  if (harness.last_status() != 0) {
    state.SkipWithError("the request failed");
    return;
  }
  for (auto _ : state) harness.Handle(op, payload);
}
void BM_HandlerPing(benchmark::State& state) { HandlerRequest(state, wire::Op::kPing); }
BENCHMARK(BM_HandlerPing);
void BM_HandlerExecuteNoop(benchmark::State& state) { HandlerRequest(state, wire::Op::kExecute); }
BENCHMARK(BM_HandlerExecuteNoop);

// LOAD of native code the server has not seen (a 17 KB library, made new each time by bytes
// appended past its end): the ELF checks, the trial load in a child process, dlopen. With
// --max-libraries' default the older copies are unloaded as the run goes on.
void BM_LoadNewNativeLibrary(benchmark::State& state) {
  std::unique_ptr<Client> client = bench::NewClient(state);
  if (client == nullptr) return;
  std::string code(active_libraries::test2().code());
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t n = static_cast<uint64_t>(::getpid()) << 32;
  for (auto _ : state) {
    std::string fresh = code;
    ++n;
    fresh.append(reinterpret_cast<const char*>(&n), sizeof(n));
    if (!client->Load(CodeKind::kNative, "", fresh).ok()) {
      state.SkipWithError("LOAD failed");
      break;
    }
  }
  bench::ReportCounters(state, *client, rt0, bytes0);
}
BENCHMARK(BM_LoadNewNativeLibrary)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ExecuteNoopUnix(benchmark::State& state) { ExecuteNoop(state, Transport::kUnix); }
BENCHMARK(BM_ExecuteNoopUnix)->Threads(1)->UseRealTime();

// --- The same ops over UCX (ucx://): READ, WRITE, CAS and FETCH_ADD one-sided, the rest as
// active messages. round_trips/op is the client's count, as over TCP. ---

void BM_PingUcx(benchmark::State& state) {
  RunClientBenchmark(
      state, [](Client& c) { return c.Ping().ok(); }, Transport::kUcx);
}
BENCHMARK(BM_PingUcx)->Threads(1)->UseRealTime();

void BM_ReadUcx(benchmark::State& state) {
  uint32_t len = static_cast<uint32_t>(state.range(0));
  RunClientBenchmark(
      state, [len](Client& c) { return c.Read(kBenchAddr, len).ok(); }, Transport::kUcx);
}
BENCHMARK(BM_ReadUcx)->Arg(8)->Arg(4096)->Threads(1)->Threads(4)->UseRealTime();

void BM_WriteUcx(benchmark::State& state) {
  std::string data(static_cast<size_t>(state.range(0)), 'w');
  RunClientBenchmark(
      state, [&data](Client& c) { return c.Write(kBenchAddr, data).ok(); }, Transport::kUcx);
}
BENCHMARK(BM_WriteUcx)->Arg(8)->Arg(4096)->Threads(1)->UseRealTime();

void BM_CasUcx(benchmark::State& state) {
  uint64_t addr = kBenchAddr + 4096 + 8 * static_cast<uint64_t>(state.thread_index());
  RunClientBenchmark(
      state, [addr](Client& c) { return c.CompareAndSwap(addr, 0, 0).ok(); }, Transport::kUcx);
}
BENCHMARK(BM_CasUcx)->Threads(1)->UseRealTime();

void BM_FetchAddUcx(benchmark::State& state) {
  RunClientBenchmark(
      state, [](Client& c) { return c.FetchAdd(kBenchAddr + 8192, 1).ok(); }, Transport::kUcx);
}
BENCHMARK(BM_FetchAddUcx)->Threads(1)->UseRealTime();

void BM_ExecuteNoopUcx(benchmark::State& state) { ExecuteNoop(state, Transport::kUcx); }
BENCHMARK(BM_ExecuteNoopUcx)->Threads(1)->UseRealTime();

void BM_ReadBatch16Ucx(benchmark::State& state) {
  RunClientBenchmark(
      state,
      [](Client& c) {
        class Batch b = c.Batch();
        for (int i = 0; i < 16; ++i) b.Read(kBenchAddr + 64 * i, 8);
        return b.Send().ok();
      },
      Transport::kUcx);
}
BENCHMARK(BM_ReadBatch16Ucx)->Threads(1)->UseRealTime();

// UCX requests spread over the server's progress threads: 8 connections each call a function that
// waits 1 ms on the server (sleeps: waiting, not computing, so the cores do not decide it),
// against a server of its own with --io-threads N (the argument) and --workers 0, so every EXECUTE
// runs on its session's progress thread. With one thread the calls queue behind each other; with
// two they run two at a time (items/s is the figure; docs/BENCHMARKS.md).
Server& WaitingCallsServer(int io_threads) {
  static absl::Mutex mu;
  static std::map<int, std::unique_ptr<Server>>* servers = [] {
    auto* all = new std::map<int, std::unique_ptr<Server>>();
    std::atexit([] {
      for (auto& [n, server] : *servers) server->Stop();
    });
    return all;
  }();
  absl::MutexLock lock(&mu);
  std::unique_ptr<Server>& server = (*servers)[io_threads];
  if (server == nullptr) {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.memory_size = 64 << 20;
    options.io_threads = io_threads;
    options.handler.workers = 0;
    options.ucx = ServerOptions::Ucx::kOn;
    absl::StatusOr<std::unique_ptr<Server>> started = Server::Start(options);
    if (!started.ok()) {
      std::fprintf(stderr, "cannot start ardmad: %s\n", started.status().ToString().c_str());
      std::abort();
    }
    server = *std::move(started);
  }
  return *server;
}

void BM_UcxWaitingCalls(benchmark::State& state) {
  Server& server = WaitingCallsServer(static_cast<int>(state.range(0)));
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(absl::StrCat(ToAbsl(kUcxPrefix), server.address()));
  if (!client.ok()) {
    state.SkipWithError(std::string(client.status().message()).c_str());
    return;
  }
  const ActiveLibrary& test = active_libraries::test();
  if (!EnsureLoaded(**client, test).ok()) {
    state.SkipWithError("cannot load the test library");
    return;
  }
  const std::string one_ms = testing::U64s({1});
  uint64_t rt0 = (*client)->counters().round_trips;
  uint64_t bytes0 = (*client)->counters().bytes_sent + (*client)->counters().bytes_received;
  for (auto _ : state) {
    if (!(*client)->Execute(test.hash(), "test.sleep", one_ms).ok()) {
      state.SkipWithError("EXECUTE failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  ReportCounters(state, **client, rt0, bytes0);
}
BENCHMARK(BM_UcxWaitingCalls)
    ->ArgName("io_threads")
    ->Arg(1)
    ->Arg(2)
    ->Threads(8)
    ->UseRealTime()
    ->MinTime(2.0);

// Pipelined: 16 READs of 8 bytes in one batch (one flight).
void BM_ReadBatch16(benchmark::State& state) {
  RunClientBenchmark(state, [](Client& c) {
    class Batch b = c.Batch();
    for (int i = 0; i < 16; ++i) b.Read(kBenchAddr + 64 * i, 8);
    return b.Send().ok();
  });
}
BENCHMARK(BM_ReadBatch16)->Threads(1)->UseRealTime();

// --- Authentication (docs/SECURITY.md): the same ops against a server with an auth file. ---

constexpr char kBenchSecret[] = "bench-secret-0123456789abcdef";

// A second in-process ardmad that requires authentication.
Server& AuthServer() {
  static Server* server = [] {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.memory_size = 64 << 20;
    options.handler.workers = 2;
    options.handler.auth = std::make_shared<const security::AuthTable>(
        *security::AuthTable::Parse(std::string("bench ") + kBenchSecret + " all", "bench"));
    static std::unique_ptr<Server> owner = *Server::Start(options);
    std::atexit([] { owner->Stop(); });
    return owner.get();
  }();
  return *server;
}

// auth:0 the usual server, no credentials; auth:1 the authenticating server, with them.
absl::StatusOr<std::unique_ptr<Client>> ConnectFor(bool auth) {
  ClientOptions options;
  options.credentials_from_environment = false;
  if (auth) options.credentials = security::Credentials{"bench", kBenchSecret};
  return Client::Connect(auth ? AuthServer().address() : SharedServer().address(), options);
}

// A connection set up (and authenticated) and closed per iteration.
void BM_Connect(benchmark::State& state) {
  bool auth = state.range(0) != 0;
  uint64_t round_trips = 0;
  for (auto _ : state) {
    absl::StatusOr<std::unique_ptr<Client>> c = ConnectFor(auth);
    if (!c.ok() || !(*c)->Ping().ok()) {
      state.SkipWithError("connect failed");
      return;
    }
    round_trips += (*c)->counters().round_trips.load() - 1;  // less the PING
  }
  state.counters["round_trips/op"] =
      static_cast<double>(round_trips) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Connect)->ArgName("auth")->Arg(0)->Arg(1)->UseRealTime();

// One 8-byte READ per iteration on an open connection: authentication adds nothing per op.
void BM_ReadAuth(benchmark::State& state) {
  absl::StatusOr<std::unique_ptr<Client>> c = ConnectFor(state.range(0) != 0);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return;
  }
  Client& client = **c;
  uint64_t rt0 = client.counters().round_trips,
           b0 = client.counters().bytes_sent + client.counters().bytes_received;
  for (auto _ : state) {
    if (!client.Read(kBenchAddr, 8).ok()) {
      state.SkipWithError("READ failed");
      return;
    }
  }
  ReportCounters(state, client, rt0, b0);
}
BENCHMARK(BM_ReadAuth)->ArgName("auth")->Arg(0)->Arg(1)->UseRealTime();

// --- TLS: an 8-byte READ and a no-op PING over TLS beside plain TCP, on open connections. ---

Server& TlsServer() {
  static Server* server = [] {
    const testing::TestCertificates& certs = testing::TestCertificates::Get();
    if (!certs.ok()) {
      std::fprintf(stderr, "cannot make TLS certificates (is openssl installed?)\n");
      std::abort();
    }
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.memory_size = 64 << 20;
    options.ucx = ServerOptions::Ucx::kOff;
    options.tls_cert = certs.Path("server.pem");
    options.tls_key = certs.Path("server.key");
    static std::unique_ptr<Server> owner = *Server::Start(options);
    std::atexit([] { owner->Stop(); });
    return owner.get();
  }();
  return *server;
}

// tls:0 plain TCP to the usual server; tls:1 TLS to the TLS server.
void BM_ReadTls(benchmark::State& state) {
  bool tls = state.range(0) != 0;
  ClientOptions options;
  options.credentials_from_environment = false;
  if (tls) options.tls.ca_file = testing::TestCertificates::Get().Path("ca.pem");
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect(tls ? "tls://" + TlsServer().address() : SharedServer().address(), options);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return;
  }
  Client& client = **c;
  uint32_t len = static_cast<uint32_t>(state.range(1));
  uint64_t rt0 = client.counters().round_trips,
           b0 = client.counters().bytes_sent + client.counters().bytes_received;
  for (auto _ : state) {
    if (!client.Read(kBenchAddr, len).ok()) {
      state.SkipWithError("READ failed");
      return;
    }
  }
  ReportCounters(state, client, rt0, b0);
}
BENCHMARK(BM_ReadTls)->ArgNames({"tls", "bytes"})->ArgsProduct({{0, 1}, {8, 4096}})->UseRealTime();

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
