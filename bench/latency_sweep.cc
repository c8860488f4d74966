// The Active RDMA paper's latency sweep: the same operations, active vs RDMA, as the network round trip grows
// (ardma-delay-proxy adds a one-way delay each way in front of the in-process ardmad), and the
// paper's synthetic-time model checked against it. With ARDMA_BENCH_TRANSPORT=ucx the client talks
// UCX to the server directly (one-sided READ/WRITE/CAS/FETCH_ADD) and the same delay is added by
// the client to every round trip (ClientOptions::extra_round_trip_time = 2 x delay), since no
// proxy can sit in a shared-memory path:
//
//   model time per op = round trips per op x measured RTT + server time per op
//
// BM_Sweep/op:{0 dht.get, 1 dht.put, 2 list.append@20}/rdma:{0,1}/delay_us:D
// Counters: round_trips/op; rtt_us (measured at set-up through the proxy or the added delay: a
// PING in active mode, an 8-byte READ in RDMA mode, the round trip each mode is made of; over
// TCP the two are the same, over UCX the READ is one-sided); server_us
// (active code time per op, from STATS execute.ns); model_us; model/measured.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "bench/delay_proxy.h"
#include "benchmark/benchmark.h"
#include "core/status_macros.h"
#include "core/testing/test_server.h"
#include "services/dht/dht_client.h"
#include "services/list/list_client.h"

namespace ardma {
namespace {

constexpr int kListLength = 20;

uint64_t ExecuteNs(Client& direct) {
  absl::StatusOr<uint64_t> ns = testing::StatValue(direct, "execute.ns");
  return ns.value_or(0);
}

void BM_Sweep(benchmark::State& state) {
  int op = static_cast<int>(state.range(0));
  Mode mode = state.range(1) == 0 ? Mode::kActive : Mode::kRdma;
  absl::Duration delay = absl::Microseconds(state.range(2));
  std::unique_ptr<bench::DelayProxy> proxy;
  absl::StatusOr<std::unique_ptr<Client>> client;
  if (bench::BenchOverUcx()) {
    ClientOptions options;
    options.extra_round_trip_time = 2 * delay;
    client = Client::Connect("ucx://" + bench::SharedServer().address(), options);
  } else {
    absl::StatusOr<std::unique_ptr<bench::DelayProxy>> started =
        bench::DelayProxy::Start(bench::SharedServer().address(), delay);
    if (!started.ok()) {
      state.SkipWithError(started.status().ToString().c_str());
      return;
    }
    proxy = std::move(*started);
    client = Client::Connect(proxy->address());
  }
  absl::StatusOr<std::unique_ptr<Client>> direct = Client::Connect(bench::SharedServer().address());
  if (!client.ok() || !direct.ok()) {
    state.SkipWithError("connect failed");
    return;
  }
  dht::DhtClient dht(client->get(), mode);
  list::ListClient lists(client->get(), mode);
  std::string list_name = absl::StrCat("sweep-", state.range(1), "-", state.range(2));
  auto run = [&](uint64_t i) -> absl::Status {
    switch (op) {
      case 0:
        return dht.Get("sweep", absl::StrCat("key", i % 100)).status();
      case 1:
        return dht.Put("sweep", absl::StrCat("key", i % 100), "value").status();
      default: {
        // Append to a list of kListLength, then take it off again (untimed in spirit: the remove
        // is at the head, one round trip in either mode, and counted in round_trips/op).
        ARDMA_RETURN_IF_ERROR(lists.Append(list_name, int64_t{1}));
        return lists.Remove(list_name, kListLength).status();
      }
    }
  };
  // Set up: the table's keys, the list's length, code shipped, caches warm.
  for (int k = 0; k < 100; ++k) {
    if (!dht.Put("sweep", absl::StrCat("key", k), "value").ok()) {
      state.SkipWithError("setup failed");
      return;
    }
  }
  if (op == 2) {
    absl::StatusOr<uint64_t> size = lists.Size(list_name);
    for (uint64_t n = size.value_or(0); n < kListLength; ++n) {
      if (!lists.Append(list_name, int64_t{0}).ok()) {
        state.SkipWithError("setup failed");
        return;
      }
    }
  }
  if (!run(0).ok()) {
    state.SkipWithError("warm-up failed");
    return;
  }
  // The RTT: the median of 15 batches' means (10 probes each). One slow probe (a progress thread
  // waking from its idle sleep takes ~20 us) outweighed 19 sub-microsecond ones in a plain mean.
  constexpr int kBatches = 15, kProbesPerBatch = 10;
  std::vector<double> batch_us;
  for (int b = 0; b < kBatches; ++b) {
    absl::Time t0 = absl::Now();
    for (int p = 0; p < kProbesPerBatch; ++p) {
      if (mode == Mode::kActive) {
        (*client)->Ping().IgnoreError();
      } else {
        (*client)->Read(0, 8).IgnoreError();
      }
    }
    batch_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0) / kProbesPerBatch);
  }
  std::nth_element(batch_us.begin(), batch_us.begin() + kBatches / 2, batch_us.end());
  double rtt_us = batch_us[kBatches / 2];
  uint64_t rt0 = (*client)->counters().round_trips;
  uint64_t ns0 = ExecuteNs(**direct);
  uint64_t i = 0;
  for (auto _ : state) {
    if (absl::Status s = run(++i); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  double n = static_cast<double>(state.iterations());
  double rts = static_cast<double>((*client)->counters().round_trips - rt0) / n;
  double server_us = static_cast<double>(ExecuteNs(**direct) - ns0) / n / 1000.0;
  state.counters["round_trips/op"] = rts;
  state.counters["rtt_us"] = rtt_us;
  state.counters["server_us"] = server_us;
  state.counters["model_us"] = rts * rtt_us + server_us;
}

void SweepArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"op", "rdma", "delay_us"});
  for (int op : {0, 1, 2}) {
    for (int rdma : {0, 1}) {
      for (int delay : {0, 25, 50, 100, 250, 500}) b->Args({op, rdma, delay});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
}
BENCHMARK(BM_Sweep)->Apply(SweepArgs);

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
