// What --sync costs: one-sided operations against an ardmad whose heap is a memory file on disk
// (ARDMA_BENCH_SYNC_DIR, default /var/tmp; not tmpfs, where syncing is free), one server per
// policy in this process, over TCP.
//
//   BM_Write/size/policy     WRITE of `size` bytes, at a new address each time (1 MiB round)
//   BM_FetchAdd/policy       FETCH_ADD of one word
// policy: 0 = none, 1 = interval (1 s), 2 = always. Compare within one run: the disk's own speed
// decides the `always` figures.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/memory/heap.h"
#include "core/server/server.h"

namespace ardma {
namespace {

constexpr uint64_t kSpan = 1 << 20;

Server* ServerFor(int policy) {
  static std::array<std::unique_ptr<Server>, 3> servers;
  if (servers[policy] == nullptr) {
    const char* dir = std::getenv("ARDMA_BENCH_SYNC_DIR");
    std::string file = absl::StrCat(dir != nullptr ? dir : "/var/tmp", "/ardma_sync_bench.",
                                    ::getpid(), ".", policy);
    std::filesystem::remove(file);
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.memory_size = 64 << 20;
    options.memory_file = file;
    options.ucx = ServerOptions::Ucx::kOff;
    options.handler.sync = static_cast<SyncPolicy>(policy);
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    if (!s.ok()) {
      std::fprintf(stderr, "cannot start ardmad: %s\n", s.status().ToString().c_str());
      std::abort();
    }
    servers[policy] = *std::move(s);
    std::filesystem::remove(file);  // the mapping keeps it until the process ends
  }
  return servers[policy].get();
}

std::unique_ptr<Client> Connect(benchmark::State& state, int policy) {
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(ServerFor(policy)->address());
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(c);
}

void BM_Write(benchmark::State& state) {
  std::unique_ptr<Client> client = Connect(state, static_cast<int>(state.range(1)));
  if (client == nullptr) return;
  std::string data(static_cast<size_t>(state.range(0)), 's');
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t offset = 0;
  for (auto _ : state) {
    if (!client->Write(heap::kDataStart + (1 << 20) + offset, data).ok()) {
      state.SkipWithError("WRITE failed");
      break;
    }
    offset = (offset + 4096) % kSpan;
  }
  bench::ReportCounters(state, *client, rt0, bytes0);
}
BENCHMARK(BM_Write)->ArgsProduct({{8, 4096}, {0, 1, 2}})->UseRealTime();

void BM_FetchAdd(benchmark::State& state) {
  std::unique_ptr<Client> client = Connect(state, static_cast<int>(state.range(0)));
  if (client == nullptr) return;
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  for (auto _ : state) {
    if (!client->FetchAdd(heap::kDataStart + (1 << 20), 1).ok()) {
      state.SkipWithError("FETCH_ADD failed");
      break;
    }
  }
  bench::ReportCounters(state, *client, rt0, bytes0);
}
BENCHMARK(BM_FetchAdd)->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace ardma
BENCHMARK_MAIN();
