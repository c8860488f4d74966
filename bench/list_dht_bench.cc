// The Active RDMA paper's list and hash table table (the Active RDMA paper, "Results for RDMA and Active operations on
// a list and hash table"), RDMA mode vs active mode in one run, beside the raw TCP floor.
//
//   BM_ListPut200/<mode>   200 appends building a list of 200 elements (each walks to the tail)
//   BM_ListAppendAt200/<mode>  one append to a list of exactly 200 elements
//   BM_ListGet200/<mode>   get(i) for every i of a 200-element list
//   BM_DhtGet/<mode>/<value bytes>, BM_DhtPut/<mode>/<value bytes>   on a table of 10,000 keys
//   ->Threads(50) on the active DHT ops: 50 connections, for the Redis comparison
//   (bench/redis_compare.sh runs redis-benchmark against redis-server in the same run).
//
// Time and counters are per operation: round_trips/op and bytes/op from the client's counters.
#include <atomic>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/client/invoke.h"
#include "core/active/active_library.h"
#include "core/active/local_context.h"
#include "core/wire/messages.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_format.h"
#include "services/list/list_client.h"

namespace ardma {
namespace {

constexpr int kListLength = 200;
constexpr int kDhtKeys = 10000;

Mode ModeArg(benchmark::State& state) { return state.range(0) == 0 ? Mode::kActive : Mode::kRdma; }

std::string Key(int i) { return absl::StrCat("key:", i); }

// Sets per-op counters when each iteration performs `ops_per_iteration` operations.
void ReportPerOp(benchmark::State& state, Client& client, uint64_t rt0, uint64_t bytes0,
                 int ops_per_iteration) {
  double ops = static_cast<double>(state.iterations()) * ops_per_iteration;
  uint64_t bytes = client.counters().bytes_sent + client.counters().bytes_received;
  state.counters["round_trips/op"] = benchmark::Counter(
      static_cast<double>(client.counters().round_trips - rt0) / ops,
      benchmark::Counter::kAvgThreads);
  state.counters["bytes/op"] =
      benchmark::Counter(static_cast<double>(bytes - bytes0) / ops, benchmark::Counter::kAvgThreads);
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}

void BM_ListPut200(benchmark::State& state) {
  auto client = bench::NewClient(state);
  if (!client) return;
  list::ListClient lists(client.get(), ModeArg(state));
  std::string name = absl::StrCat("put200-", state.range(0));
  if (!lists.Append(name, int64_t{0}).ok() || !lists.Remove(name, 0).ok()) {
    state.SkipWithError("list setup failed");
    return;
  }
  uint64_t rt = 0, bytes = 0;
  for (auto _ : state) {
    uint64_t rt0 = client->counters().round_trips;
    uint64_t b0 = client->counters().bytes_sent + client->counters().bytes_received;
    for (int64_t i = 0; i < kListLength; ++i) {
      if (!lists.Append(name, i).ok()) state.SkipWithError("append failed");
    }
    rt += client->counters().round_trips - rt0;
    bytes += client->counters().bytes_sent + client->counters().bytes_received - b0;
    state.PauseTiming();
    for (int i = 0; i < kListLength; ++i) lists.Remove(name, 0).IgnoreError();
    state.ResumeTiming();
  }
  double ops = static_cast<double>(state.iterations()) * kListLength;
  state.counters["round_trips/op"] = static_cast<double>(rt) / ops;
  state.counters["bytes/op"] = static_cast<double>(bytes) / ops;
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}
BENCHMARK(BM_ListPut200)->ArgName("rdma")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// One append to a list of exactly 200 elements (it walks all 200), the target's measure. The
// element is removed again outside the timed region.
void BM_ListAppendAt200(benchmark::State& state) {
  auto client = bench::NewClient(state);
  if (!client) return;
  list::ListClient lists(client.get(), ModeArg(state));
  std::string name = absl::StrCat("at200-", state.range(0));
  auto size = lists.Size(name);
  for (int64_t i = size.ok() ? static_cast<int64_t>(*size) : 0; i < kListLength; ++i) {
    if (!lists.Append(name, i).ok()) state.SkipWithError("list setup failed");
  }
  uint64_t rt = 0, bytes = 0;
  for (auto _ : state) {
    uint64_t rt0 = client->counters().round_trips;
    uint64_t b0 = client->counters().bytes_sent + client->counters().bytes_received;
    if (!lists.Append(name, int64_t{-1}).ok()) state.SkipWithError("append failed");
    rt += client->counters().round_trips - rt0;
    bytes += client->counters().bytes_sent + client->counters().bytes_received - b0;
    state.PauseTiming();
    lists.Remove(name, kListLength).IgnoreError();
    state.ResumeTiming();
  }
  double ops = static_cast<double>(state.iterations());
  state.counters["round_trips/op"] = static_cast<double>(rt) / ops;
  state.counters["bytes/op"] = static_cast<double>(bytes) / ops;
}
BENCHMARK(BM_ListAppendAt200)->ArgName("rdma")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_ListGet200(benchmark::State& state) {
  auto client = bench::NewClient(state);
  if (!client) return;
  list::ListClient lists(client.get(), ModeArg(state));
  std::string name = absl::StrCat("get200-", state.range(0));
  auto size = lists.Size(name);
  for (int64_t i = size.ok() ? static_cast<int64_t>(*size) : 0; i < kListLength; ++i) {
    if (!lists.Append(name, i).ok()) state.SkipWithError("list setup failed");
  }
  lists.Get(name, 0).IgnoreError();  // ship the library / cache the header
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  for (auto _ : state) {
    for (uint64_t i = 0; i < kListLength; ++i) {
      if (!lists.Get(name, i).ok()) state.SkipWithError("get failed");
    }
  }
  ReportPerOp(state, *client, rt0, bytes0, kListLength);
}
BENCHMARK(BM_ListGet200)->ArgName("rdma")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// Fills table "bench<value bytes>" with kDhtKeys keys once per process.
bool FillTable(Client& client, const std::string& table, size_t value_bytes) {
  dht::DhtClient dht(&client, Mode::kActive);
  auto size = dht.Size(table);
  if (size.ok() && *size >= kDhtKeys) return true;
  std::string value(value_bytes, 'v');
  for (int i = 0; i < kDhtKeys; ++i) {
    if (!dht.Put(table, Key(i), value).ok()) return false;
  }
  return true;
}

void BM_DhtGet(benchmark::State& state) {
  auto client = bench::NewClient(state);
  if (!client) return;
  size_t value_bytes = static_cast<size_t>(state.range(1));
  std::string table = absl::StrCat("bench", value_bytes);
  if (!FillTable(*client, table, value_bytes)) {
    state.SkipWithError("fill failed");
    return;
  }
  dht::DhtClient dht(client.get(), ModeArg(state));
  dht.Get(table, Key(0)).IgnoreError();  // ship the library / cache the geometry
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    if (!dht.Get(table, Key(static_cast<int>(i++ % kDhtKeys))).ok()) {
      state.SkipWithError("get failed");
      break;
    }
  }
  ReportPerOp(state, *client, rt0, bytes0, 1);
}

void BM_DhtPut(benchmark::State& state) {
  auto client = bench::NewClient(state);
  if (!client) return;
  size_t value_bytes = static_cast<size_t>(state.range(1));
  std::string table = absl::StrCat("bench", value_bytes);
  if (!FillTable(*client, table, value_bytes)) {
    state.SkipWithError("fill failed");
    return;
  }
  dht::DhtClient dht(client.get(), ModeArg(state));
  std::string value(value_bytes, 'w');
  dht.Put(table, Key(0), value).IgnoreError();
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    if (!dht.Put(table, Key(static_cast<int>(i++ % kDhtKeys)), value).ok()) {
      state.SkipWithError("put failed");
      break;
    }
  }
  ReportPerOp(state, *client, rt0, bytes0, 1);
}

void DhtArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rdma", "value"})->UseRealTime();
  for (int mode : {0, 1}) {
    for (int value : {3, 1024}) b->Args({mode, value});
  }
}
BENCHMARK(BM_DhtGet)->Apply(DhtArgs)->Threads(1);
BENCHMARK(BM_DhtPut)->Apply(DhtArgs)->Threads(1);
// 50 connections, redis-benchmark's default shape (3-byte values).
BENCHMARK(BM_DhtGet)->ArgNames({"rdma", "value"})->Args({0, 3})->Threads(50)->UseRealTime();
BENCHMARK(BM_DhtPut)->ArgNames({"rdma", "value"})->Args({0, 3})->Threads(50)->UseRealTime();

// The server's own cost of an active DHT GET and PUT (RequestHandler::Handle on this thread, no
// transport, no client): the library by hash, the table by name (the server looks it up: the
// request a client sends before it has resolved the table), a GET with no retry record, on a
// table of kDhtKeys keys with 3-byte values. BM_DhtGetLocal: the GET function alone, called on
// the server's memory (a LocalContext) without the handler.
void HandlerDht(benchmark::State& state, bool put, bool local = false) {
  bench::HandlerHarness harness(64 << 20);
  const ActiveLibrary& library = active_libraries::dht();
  if (!harness.Load(state, library)) return;
  std::string target;
  dht::EncodeTarget(dht::Target{"bench"}, &target);
  auto request = [&](std::string_view function, std::string args) {
    std::string payload;
    wire::EncodeExecuteRequest(
        {.by_hash = true, .hash = library.hash(), .function = function, .args = target + args},
        &payload);
    return payload;
  };
  std::vector<std::string> gets, puts;
  for (int i = 0; i < kDhtKeys; ++i) {
    puts.push_back(request("dht.put", dht::EncodePutArgs(Key(i), "vvv")));
    gets.push_back(request("dht.get", dht::EncodeKeyArgs(Key(i))));
    harness.Handle(wire::Op::kExecute, puts.back());
    if (harness.last_status() != 0) {
      state.SkipWithError(absl::StrCat("dht.put: ", ToAbsl(harness.last_payload())).c_str());
      return;
    }
  }
  const std::vector<std::string>& sent = put ? puts : gets;
  size_t i = 0;
  if (local) {
    std::vector<std::string> args;
    for (int k = 0; k < kDhtKeys; ++k) args.push_back(target + dht::EncodeKeyArgs(Key(k)));
    ActiveFunction get = library.table().Find("dht.get");
    Execution ex{.regions = &harness.regions()};
    for (auto _ : state) {
      LocalContext ctx(&ex);
      benchmark::DoNotOptimize(get(ctx, args[i]));
      if (++i == args.size()) i = 0;
    }
    return;
  }
  for (auto _ : state) {
    harness.Handle(wire::Op::kExecute, sent[i], /*idempotent=*/!put);
    if (++i == sent.size()) i = 0;
  }
  harness.Handle(wire::Op::kExecute, gets[0]);
  if (harness.last_status() != 0 || harness.last_payload().find("vvv") == std::string::npos) {
    state.SkipWithError("dht.get did not answer the value put");
  }
}
void BM_HandlerDhtGet(benchmark::State& state) { HandlerDht(state, false); }
BENCHMARK(BM_HandlerDhtGet);
void BM_HandlerDhtPut(benchmark::State& state) { HandlerDht(state, true); }
BENCHMARK(BM_HandlerDhtPut);
void BM_DhtGetLocal(benchmark::State& state) { HandlerDht(state, false, true); }
BENCHMARK(BM_DhtGetLocal);

// 50 connections, each with one request in flight, driven from the responses' callbacks (the
// shape of redis-benchmark's event loop; no thread hand-off per request). Active mode.
void DhtClosedLoop(benchmark::State& state, bool put) {
  constexpr int kConnections = 50, kOpsPerIteration = 20000;
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kConnections; ++c) {
    clients.push_back(bench::NewClient(state));
    if (!clients.back()) return;
  }
  if (!FillTable(*clients[0], "bench3", 3)) {
    state.SkipWithError("fill failed");
    return;
  }
  for (auto& c : clients) {
    if (!EnsureLoaded(*c, active_libraries::dht()).ok()) state.SkipWithError("load failed");
  }
  // Arguments for every key, encoded once: target by name, then the key (and value).
  std::vector<std::string> args(kDhtKeys);
  for (int i = 0; i < kDhtKeys; ++i) {
    dht::EncodeTarget(dht::Target{"bench3"}, &args[i]);
    args[i] += put ? dht::EncodePutArgs(Key(i), "www") : dht::EncodeKeyArgs(Key(i));
  }
  const char* function = put ? "dht.put" : "dht.get";
  uint64_t rt0 = 0, bytes0 = 0;
  for (auto& c : clients) {
    rt0 += c->counters().round_trips;
    bytes0 += c->counters().bytes_sent + c->counters().bytes_received;
  }
  std::atomic<bool> failed{false};
  for (auto _ : state) {
    std::atomic<int> issued{0}, completed{0};
    std::promise<void> done;
    std::function<void(Client*)> issue = [&](Client* c) {
      int n = issued.fetch_add(1);
      if (n >= kOpsPerIteration) return;
      c->ExecuteAsync(function, args[n % kDhtKeys], [&, c](ResponsePayload r) {
        if (!r.ok()) failed = true;
        if (completed.fetch_add(1) + 1 == kOpsPerIteration) done.set_value();
        issue(c);
      });
    };
    for (auto& c : clients) issue(c.get());
    done.get_future().wait();
  }
  if (failed) state.SkipWithError("an operation failed");
  uint64_t rt = 0, bytes = 0;
  for (auto& c : clients) {
    rt += c->counters().round_trips;
    bytes += c->counters().bytes_sent + c->counters().bytes_received;
  }
  double ops = static_cast<double>(state.iterations()) * kOpsPerIteration;
  state.counters["round_trips/op"] = static_cast<double>(rt - rt0) / ops;
  state.counters["bytes/op"] = static_cast<double>(bytes - bytes0) / ops;
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}
void BM_DhtGetClosedLoop50(benchmark::State& state) { DhtClosedLoop(state, false); }
void BM_DhtPutClosedLoop50(benchmark::State& state) { DhtClosedLoop(state, true); }
BENCHMARK(BM_DhtGetClosedLoop50)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DhtPutClosedLoop50)->UseRealTime()->Unit(benchmark::kMillisecond);

// The floor for an active GET of a 3-byte value: 75 bytes each way, as its bytes/op (150.8).
void BM_RawTcpPingPong(benchmark::State& state) {
  bench::RunRawTcpPingPong(state, static_cast<size_t>(state.range(0)));
}
BENCHMARK(BM_RawTcpPingPong)->Arg(75)->UseRealTime();

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
