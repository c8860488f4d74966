// The heap allocator (core/memory/heap.h), both modes:
//
//   BM_AllocFree/size:S/rdma:{0,1}   one Allocate + Free of S bytes: active mode on the server's
//                                    memory (a LocalContext, as active code runs), RDMA mode over a
//                                    client (RemoteContext; round_trips/op counts Allocate and Free
//                                    together, alloc_round_trips the Allocate alone)
//   BM_AllocFreeThreads/threads:T    64-byte Allocate + Free from T threads at once, active mode
//   BM_Churn                         the heap issue's churn (16 B..64 MiB, 4 threads, 20x a 1 GiB
//                                    region, under 60% live): the fragmentation it leaves while
//                                    its data is still live, and whether 90% of the region can be
//                                    allocated once everything is freed
//   BM_FirstTouch/how:H              writing 256 MiB of the kind of memory the server's heap is
//                                    (System V shared memory, as UCX allocates it): H=0 freshly
//                                    attached, H=1 the same after MADV_POPULATE_WRITE (timed too),
//                                    H=2 memory written before. What a first copy onto fresh
//                                    heap pays on this machine (docs/BENCHMARKS.md, issue 34).
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <initializer_list>
#include <vector>

#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/active/local_context.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/testing/heap_churn.h"

namespace ardma {
namespace {

// A formatted heap in local memory, as the server's active code sees it.
struct LocalHeap {
  explicit LocalHeap(uint64_t size) {
    regions.Add(*Region::Create({.size = size}));
    Execution ex{.regions = &regions};
    LocalContext ctx(&ex);
    (void)heap::FormatIfNeeded(ctx, size);
  }
  RegionTable regions;
};

LocalHeap& SharedLocalHeap() {
  static LocalHeap* heap = new LocalHeap(256 << 20);
  return *heap;
}

void BM_AllocFree(benchmark::State& state) {
  uint64_t size = static_cast<uint64_t>(state.range(0));
  bool rdma = state.range(1) != 0;
  std::unique_ptr<Client> client;
  std::unique_ptr<Context> ctx;
  Execution ex{.regions = &SharedLocalHeap().regions};
  if (rdma) {
    client = bench::NewClient(state);
    if (client == nullptr) return;
    ctx = std::make_unique<RemoteContext>(client.get(), std::initializer_list<const ActiveLibrary*>{});
  } else {
    ctx = std::make_unique<LocalContext>(&ex);
  }
  uint64_t rt0 = rdma ? client->counters().round_trips.load() : 0, alloc_rts = 0;
  for (auto _ : state) {
    uint64_t before = rdma ? client->counters().round_trips.load() : 0;
    absl::StatusOr<uint64_t> a = heap::Allocate(*ctx, size);
    if (!a.ok()) {
      state.SkipWithError(a.status().ToString().c_str());
      return;
    }
    if (rdma) alloc_rts += client->counters().round_trips.load() - before;
    if (absl::Status s = heap::Free(*ctx, *a); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  double n = static_cast<double>(state.iterations());
  if (rdma) {
    state.counters["round_trips/op"] =
        static_cast<double>(client->counters().round_trips.load() - rt0) / n;
    state.counters["alloc_round_trips"] = static_cast<double>(alloc_rts) / n;
  }
}
BENCHMARK(BM_AllocFree)
    ->ArgNames({"size", "rdma"})
    ->ArgsProduct({{16, 256, 2048, 65536, 1 << 20}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_AllocFreeThreads(benchmark::State& state) {
  Execution ex{.regions = &SharedLocalHeap().regions};
  LocalContext ctx(&ex);
  for (auto _ : state) {
    absl::StatusOr<uint64_t> a = heap::Allocate(ctx, 64);
    if (!a.ok() || !heap::Free(ctx, *a).ok()) {
      state.SkipWithError("allocate/free failed");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocFreeThreads)->ThreadRange(1, 8)->UseRealTime();

void BM_Churn(benchmark::State& state) {
  constexpr uint64_t kRegion = 1ull << 30;
  for (auto _ : state) {
    LocalHeap h(kRegion);
    testing::ChurnShared shared;
    std::vector<std::vector<uint64_t>> kept(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        Execution ex{.regions = &h.regions};
        LocalContext ctx(&ex);
        // Kept live, to measure the fragmentation the churn leaves while its data is there.
        kept[t] = testing::ChurnWorker(
            ctx, {.region = kRegion, .max_size = 64 << 20, .seed = 99u + t, .free_at_end = false},
            shared);
      });
    }
    for (auto& t : threads) t.join();
    Execution ex{.regions = &h.regions};
    LocalContext ctx(&ex);
    heap::HeapReport r = *heap::Check(ctx);
    state.counters["failures"] = static_cast<double>(shared.failures.load());
    state.counters["live_MiB"] = static_cast<double>(r.live_bytes()) / (1 << 20);
    state.counters["free_MiB"] = static_cast<double>(r.free_bytes()) / (1 << 20);
    state.counters["largest_free_run_MiB"] = static_cast<double>(r.largest_free_run) / (1 << 20);
    state.counters["fragmentation_pct"] = r.fragmentation() * 100;
    for (auto& v : kept) {
      for (uint64_t a : v) (void)heap::Free(ctx, a);
    }
    state.counters["alloc_90pct_after_free_all"] =
        heap::Allocate(ctx, kRegion * 9 / 10).ok() ? 1 : 0;
  }
}
BENCHMARK(BM_Churn)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

void BM_FirstTouch(benchmark::State& state) {
  constexpr size_t kBytes = size_t{256} << 20;
  const int64_t how = state.range(0);
  for (auto _ : state) {
    state.PauseTiming();
    int id = ::shmget(IPC_PRIVATE, kBytes, IPC_CREAT | 0600);
    void* p = id < 0 ? reinterpret_cast<void*>(-1) : ::shmat(id, nullptr, 0);
    if (id >= 0) ::shmctl(id, IPC_RMID, nullptr);  // gone once detached
    if (p == reinterpret_cast<void*>(-1)) {
      state.SkipWithError("no System V shared memory");
      break;
    }
    if (how == 2) std::memset(p, 1, kBytes);
    state.ResumeTiming();
    if (how == 1 && ::madvise(p, kBytes, MADV_POPULATE_WRITE) != 0) {
      state.SkipWithError("MADV_POPULATE_WRITE refused");
    }
    std::memset(p, 2, kBytes);
    benchmark::ClobberMemory();
    state.PauseTiming();
    ::shmdt(p);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_FirstTouch)->ArgName("how")->DenseRange(0, 2)->Iterations(5)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
