// The rdistcc paper's Table 1: what it costs to expose a file to the farm by registering it, against the
// copy registration replaces. Sizes 16 KiB to 2 MiB; transport 0 = TCP, 1 = UCX (the server also
// registers the region with UCX: ucp_mem_map, an rkey).
//
//   BM_RegisterExisting/size/ucx    REGISTER of an existing tmpfs file (DEREGISTER untimed)
//   BM_CreateAndRegister/size/ucx   create the tmpfs file, write its bytes, REGISTER it
//   BM_Memcpy/size                  memcpy of the file's bytes into a registered buffer
//   BM_WriteToHeap/size/ucx         WRITE of those bytes into the server's heap (the copy a
//                                   client without registration makes)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"

namespace ardma {
namespace {

bench::Transport TransportArg(benchmark::State& state) {
  return state.range(1) == 0 ? bench::Transport::kTcp : bench::Transport::kUcx;
}

std::string FilePath(const std::string& name) {
  return absl::StrCat(bench::BenchRegisterDir(), "/", name);
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  return ::close(fd) == 0 && ok;
}

void Finish(benchmark::State& state, Client& client, uint64_t rt0, uint64_t bytes0) {
  bench::ReportCounters(state, client, rt0, bytes0);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * state.range(0)));
}

void BM_RegisterExisting(benchmark::State& state) {
  auto client = bench::NewClient(state, TransportArg(state));
  if (!client) return;
  std::string path = FilePath(absl::StrCat("existing.", state.range(0)));
  if (!WriteFile(path, std::string(static_cast<size_t>(state.range(0)), 'x'))) {
    state.SkipWithError("cannot write the file");
    return;
  }
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t extra_rt = 0;
  for (auto _ : state) {
    auto key = client->RegisterFile(path, /*writable=*/false);
    state.PauseTiming();
    if (!key.ok() || !client->Deregister(key->region).ok()) {
      state.SkipWithError("register failed");
      break;
    }
    ++extra_rt;
    state.ResumeTiming();
  }
  // The untimed DEREGISTER's round trips are not the registration's.
  client->counters().round_trips -= extra_rt;
  Finish(state, *client, rt0, bytes0);
  ::unlink(path.c_str());
}

void BM_CreateAndRegister(benchmark::State& state) {
  auto client = bench::NewClient(state, TransportArg(state));
  if (!client) return;
  std::string bytes(static_cast<size_t>(state.range(0)), 'y');
  std::string path = FilePath(absl::StrCat("created.", state.range(0)));
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t extra_rt = 0;
  for (auto _ : state) {
    if (!WriteFile(path, bytes)) {
      state.SkipWithError("cannot write the file");
      break;
    }
    auto key = client->RegisterFile(path, /*writable=*/false);
    state.PauseTiming();
    if (!key.ok() || !client->Deregister(key->region).ok()) {
      state.SkipWithError("register failed");
      break;
    }
    ++extra_rt;
    ::unlink(path.c_str());
    state.ResumeTiming();
  }
  client->counters().round_trips -= extra_rt;
  Finish(state, *client, rt0, bytes0);
}

void BM_Memcpy(benchmark::State& state) {
  size_t size = static_cast<size_t>(state.range(0));
  std::string path = FilePath(absl::StrCat("memcpy.", size));
  if (!WriteFile(path, std::string(size, 'z'))) {
    state.SkipWithError("cannot write the file");
    return;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  void* src = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  std::string dst(size, '\0');  // a buffer registered once, as the copy's target
  for (auto _ : state) {
    std::memcpy(dst.data(), src, size);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  ::munmap(src, size);
  ::unlink(path.c_str());
  state.counters["round_trips/op"] = 0;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * state.range(0)));
}

void BM_WriteToHeap(benchmark::State& state) {
  auto client = bench::NewClient(state, TransportArg(state));
  if (!client) return;
  std::string bytes(static_cast<size_t>(state.range(0)), 'w');
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  for (auto _ : state) {
    if (!client->Write(4096, bytes).ok()) {
      state.SkipWithError("write failed");
      break;
    }
  }
  Finish(state, *client, rt0, bytes0);
}

void Sizes(benchmark::internal::Benchmark* b, bool transports) {
  for (int64_t size : {16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20}) {
    if (!transports) {
      b->Args({size});
      continue;
    }
    for (int64_t ucx : {0, 1}) b->Args({size, ucx});
  }
}

BENCHMARK(BM_RegisterExisting)->Apply([](auto* b) { Sizes(b, true); }) -> ArgNames({"size", "ucx"});
BENCHMARK(BM_CreateAndRegister)
    ->Apply([](auto* b) { Sizes(b, true); }) -> ArgNames({"size", "ucx"});
BENCHMARK(BM_Memcpy)->Apply([](auto* b) { Sizes(b, false); }) -> ArgNames({"size"});
BENCHMARK(BM_WriteToHeap)->Apply([](auto* b) { Sizes(b, true); }) -> ArgNames({"size", "ucx"});

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
