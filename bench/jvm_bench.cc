// Java active code against native active code, in one run (issue 3's measure; the Active RDMA paper shipped
// Java class files, so this is the price of its form):
//
//   BM_Noop/lang:{0 native, 1 java}            an EXECUTE that does nothing (test.noop, Calls.noop)
//   BM_ListPut200/lang:{0,1}                   200 appends building a list of 200 (each walks to
//                                              the tail): listdemo.append vs JList.append
//   BM_ListAppendAt200/lang:{0,1}              one append to a list of exactly 200 elements (the
//                                              element is taken off again outside the timing)
// Counters round_trips/op and bytes/op as everywhere; server_us/op: time spent running the
// function on the server (STATS execute.ns), which isolates the code's speed from the round trip.
#include <cstring>
#include <string>

#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/active/jvm/java_testdata.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/testing/test_server.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(test);

namespace ardma {
namespace {

constexpr int kListLength = 200;

bool Java(benchmark::State& state) { return state.range(0) == 1; }

std::string U64s(std::initializer_list<uint64_t> values) {
  std::string out;
  for (uint64_t v : values) out.append(reinterpret_cast<const char*>(&v), 8);
  return out;
}

// Ships the Java test classes and the native libraries once per client.
bool Prepare(benchmark::State& state, Client& client) {
  for (const char* file : {"main/JList.class", "main/Calls.class"}) {
    if (!client.Load(wire::CodeKind::kJvm, "", java_testdata::Bytes(file)).ok()) {
      state.SkipWithError("cannot load the Java test classes");
      return false;
    }
  }
  if (!EnsureLoaded(client, active_libraries::listdemo()).ok() ||
      !EnsureLoaded(client, active_libraries::test()).ok()) {
    state.SkipWithError("cannot load the native libraries");
    return false;
  }
  return true;
}

uint64_t ServerNs(Client& client) { return testing::StatValue(client, "execute.ns").value_or(0); }

uint64_t Bytes(Client& client) {
  return client.counters().bytes_sent + client.counters().bytes_received;
}

// Set-up an iteration does outside the timing (resetting the list), run by Untimed so that
// neither its time nor its round trips and bytes count.
struct Untimed {
  benchmark::State& state;
  Client& client;
  uint64_t round_trips = 0, bytes = 0;
  template <typename Fn>
  bool operator()(Fn fn) {
    state.PauseTiming();
    uint64_t rt0 = client.counters().round_trips, b0 = Bytes(client);
    bool ok = fn();
    round_trips += client.counters().round_trips - rt0;
    bytes += Bytes(client) - b0;
    state.ResumeTiming();
    return ok;
  }
};

// Runs `op` per iteration; `ops` EXECUTEs per iteration for the server-time counter.
template <typename Op>
void Measure(benchmark::State& state, Client& client, int ops, Untimed& untimed, Op op) {
  uint64_t rt0 = client.counters().round_trips;
  uint64_t bytes0 = Bytes(client);
  uint64_t ns0 = ServerNs(client);
  for (auto _ : state) {
    if (!op()) {
      state.SkipWithError("EXECUTE failed");
      break;
    }
  }
  bench::ReportCounters(state, client, rt0 + untimed.round_trips, bytes0 + untimed.bytes);
  state.counters["server_us/op"] =
      (ServerNs(client) - ns0) / 1e3 / static_cast<double>(state.iterations() * ops);
  state.SetLabel(Java(state) ? "java" : "native");
}

void BM_Noop(benchmark::State& state) {
  std::unique_ptr<Client> client = bench::NewClient(state);
  if (!client || !Prepare(state, *client)) return;
  const char* fn = Java(state) ? "Calls.noop" : "test.noop";
  for (int i = 0; i < 100; ++i) (void)client->Execute(fn, "");  // warm up (JIT, inline decision)
  Untimed untimed{state, *client};
  Measure(state, *client, 1, untimed, [&] { return client->Execute(fn, "").ok(); });
}
BENCHMARK(BM_Noop)->ArgName("lang")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// A list header with room for `nodes` nodes (JList.java's layout).
uint64_t NewList(Client& client, int nodes) {
  RemoteContext ctx(&client, {});
  absl::StatusOr<uint64_t> base = heap::Allocate(ctx, 24 + 16 * static_cast<uint64_t>(nodes));
  if (!base.ok()) return 0;
  if (!client.Write(*base, U64s({*base + 24, 0, 0})).ok()) return 0;
  return *base;
}

void BM_ListPut200(benchmark::State& state) {
  std::unique_ptr<Client> client = bench::NewClient(state);
  if (!client || !Prepare(state, *client)) return;
  const char* fn = Java(state) ? "JList.append" : "listdemo.append";
  uint64_t list = NewList(*client, kListLength);
  if (list == 0) return state.SkipWithError("no memory for the list");
  for (int i = 0; i < kListLength; ++i) (void)client->Execute(fn, U64s({list, 1}));  // warm up
  Untimed untimed{state, *client};
  Measure(state, *client, kListLength, untimed, [&] {
    bool ok = untimed([&] { return client->Write(list, U64s({list + 24, 0, 0})).ok(); });
    for (uint64_t i = 0; ok && i < kListLength; ++i) {
      ok = client->Execute(fn, U64s({list, i})).ok();
    }
    return ok;
  });
}
BENCHMARK(BM_ListPut200)->ArgName("lang")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ListAppendAt200(benchmark::State& state) {
  std::unique_ptr<Client> client = bench::NewClient(state);
  if (!client || !Prepare(state, *client)) return;
  const char* fn = Java(state) ? "JList.append" : "listdemo.append";
  uint64_t list = NewList(*client, kListLength + 1);
  if (list == 0) return state.SkipWithError("no memory for the list");
  for (uint64_t i = 0; i < kListLength; ++i) (void)client->Execute(fn, U64s({list, i}));
  const uint64_t free_at_200 = list + 24 + 16 * kListLength;
  const uint64_t last = free_at_200 - 16;
  // Warm up with the same append-and-restore cycle as the timed loop.
  auto restore = [&] {
    return client->Batch()
        .Write(last, U64s({0}))
        .Write(list, U64s({free_at_200}))
        .Write(list + 16, U64s({kListLength}))
        .Send()
        .ok();
  };
  for (int i = 0; i < 50; ++i) {
    (void)client->Execute(fn, U64s({list, 7}));
    restore();
  }
  Untimed untimed{state, *client};
  Measure(state, *client, 1, untimed, [&] {
    bool ok = client->Execute(fn, U64s({list, 7})).ok();
    return untimed(restore) && ok;
  });
}
BENCHMARK(BM_ListAppendAt200)->ArgName("lang")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
