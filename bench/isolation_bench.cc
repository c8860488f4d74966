// What ardmad --isolate costs per EXECUTE: the same native function on two ardmad processes, one
// running native code in isolated worker processes and one running it in the server, over TCP
// loopback and over UCX shared memory (where the transport's own cost is smallest, so the hop to
// the worker shows most). Runs build/bin/ardmad (ARDMA_BIN_DIR overrides): run it from the
// repository root.
//
//   BM_Execute/<function>/isolate:0|1|2/ucx:0|1   0 = test.noop, 1 = test.add (one FETCH_ADD);
//                                                 isolate 2: isolated with --isolate-spin
//
// ARDMA_BENCH_ARDMAD_FLAGS adds flags to each ardmad it starts (e.g. "--io-threads 1 --nic-cpu 1").
// Compare isolate:1 with isolate:0 of the same transport and function, within one run; the
// server_ns/op counter is the server's own time per call, which shows the hop to the worker
// without the transport's noise.
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "services/dht/dht_client.h"
#include "core/testing/server_process.h"

namespace ardma {
namespace {

// Longer than the gap between one call's answer and the next call over TCP here, so a spinning
// worker is still spinning when the next call comes.
constexpr char kSpin[] = "200us";

// isolate: 0 = in the server, 1 = isolated, 2 = isolated with --isolate-spin (kSpin).
testing::ServerProcess& ServerFor(int isolate) {
  static std::unique_ptr<testing::ServerProcess> servers[3];
  if (servers[isolate] == nullptr) {
    ::setenv("UCX_TLS", "shm,self", /*overwrite=*/0);  // before this process's first UCX use
    std::vector<std::string> args = {"--memory", "64M", "--workers", "2"};
    args.insert(args.end(), {"--isolate", isolate != 0 ? "all" : "none"});
    if (isolate == 2) args.insert(args.end(), {"--isolate-spin", kSpin});
    if (const char* extra = std::getenv("ARDMA_BENCH_ARDMAD_FLAGS")) {  // e.g. "--nic-cpu 0"
      for (absl::string_view flag : absl::StrSplit(extra, ' ', absl::SkipEmpty())) {
        args.emplace_back(flag);
      }
    }
    servers[isolate] = std::make_unique<testing::ServerProcess>(args);
  }
  return *servers[isolate];
}

// A client's counters from here on: round trips/op and bytes/op, and the server's own time per
// call (STATS execute.ns: from the call's start to its result, the worker's round trip included),
// without the transport's.
class Counted {
 public:
  explicit Counted(Client& client)
      : client_(client),
        server_ns0_(testing::StatOf(client, "execute.ns")),
        rt0_(client.counters().round_trips.load()),
        bytes0_(client.counters().bytes_sent.load() + client.counters().bytes_received.load()) {}
  void Report(benchmark::State& state) {
    bench::ReportCounters(state, client_, rt0_, bytes0_);
    state.counters["server_ns/op"] =
        static_cast<double>(testing::StatOf(client_, "execute.ns") - server_ns0_) /
        static_cast<double>(state.iterations());
  }

 private:
  Client& client_;
  const uint64_t server_ns0_, rt0_, bytes0_;
};

void BM_Execute(benchmark::State& state) {
  bool add = state.range(0) == 1, ucx = state.range(2) == 1;
  int isolate = static_cast<int>(state.range(1));
  testing::ServerProcess& server = ServerFor(isolate);
  if (server.address().empty()) {
    state.SkipWithError("ardmad did not start (run from the repository root)");
    return;
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(ucx ? absl::StrCat("ucx://", server.address()) : server.address());
  if (!client.ok() || !EnsureLoaded(**client, active_libraries::test()).ok()) {
    state.SkipWithError("cannot connect or load the test library");
    return;
  }
  RemoteContext ctx(client->get(), {});
  absl::StatusOr<uint64_t> counter = heap::Allocate(ctx, 8);
  if (!counter.ok()) {
    state.SkipWithError("cannot allocate");
    return;
  }
  std::string function = add ? "test.add" : "test.noop";
  std::string args = add ? testing::U64s({*counter, 1}) : std::string();
  Counted counted(**client);
  for (auto _ : state) {
    if (!(*client)->Execute(function, args).ok()) {
      state.SkipWithError("EXECUTE failed");
      return;
    }
  }
  counted.Report(state);
}
BENCHMARK(BM_Execute)
    ->ArgsProduct({{0, 1}, {0, 1, 2}, {0, 1}})
    ->ArgNames({"add", "isolate", "ucx"})
    ->UseRealTime();

// A DHT GET (services/dht: the active code a DhtClient ships) of one key of a 1,000-key table,
// run in the server or in an isolated worker.
void BM_DhtGet(benchmark::State& state) {
  int isolate = static_cast<int>(state.range(0));
  bool ucx = state.range(1) == 1;
  testing::ServerProcess& server = ServerFor(isolate);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(ucx ? absl::StrCat("ucx://", server.address()) : server.address());
  if (server.address().empty() || !client.ok()) {
    state.SkipWithError("ardmad did not start or cannot connect (run from the repository root)");
    return;
  }
  dht::DhtClient dht(client->get(), Mode::kActive);
  for (int i = 0; i < 1000; ++i) {
    if (!dht.Put("bench", absl::StrCat("key", i), absl::StrCat("value", i)).ok()) {
      state.SkipWithError("cannot fill the table");
      return;
    }
  }
  Counted counted(**client);
  int i = 0;
  for (auto _ : state) {
    if (!dht.Get("bench", absl::StrCat("key", i++ % 1000)).ok()) {
      state.SkipWithError("GET failed");
      return;
    }
  }
  counted.Report(state);
}
BENCHMARK(BM_DhtGet)->ArgsProduct({{0, 1, 2}, {0, 1}})->ArgNames({"isolate", "ucx"})->UseRealTime();

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
