// The file system, active mode vs RDMA mode, with round trips and bytes per operation.
//
//   BM_DfsCreate/rdma:{0,1}          create a new empty file in a directory
//   BM_DfsLookup/rdma:{0,1}/depth:D  stat a file D directories deep (path resolution cost)
//   BM_DfsReaddir/rdma:{0,1}         one page listing a 100-entry directory
//   BM_DfsWrite/rdma:{0,1}/bytes:N   sequential writes of N bytes into a 16 MiB file (a handle)
//   BM_DfsRead/rdma:{0,1}/bytes:N    sequential reads of N bytes from it (a handle)
//   BM_DfsReadPath/rdma:{0,1}        64 KiB reads by path (resolving it every time)
//   BM_DfsCopy256MiB                 server-side copy of a 256 MiB file (active; its own 1 GiB
//                                    server), beside BM_Memcpy256MiB: this machine's memcpy
//
// Streaming rows also report round_trips/MiB: the Active RDMA paper's "packets" for streaming a file.
#include <sys/resource.h>

#include <atomic>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"

namespace ardma {
namespace {

constexpr uint64_t kStreamFile = 16u << 20;

Mode ModeArg(benchmark::State& state) { return state.range(0) == 0 ? Mode::kActive : Mode::kRdma; }
std::string Dir(benchmark::State& state) { return absl::StrCat("/bench-", state.range(0)); }

// Runs op(i) per iteration on a fresh client, after `setup`; reports the per-op counters.
template <typename Setup, typename Op>
void Run(benchmark::State& state, Setup setup, Op op) {
  auto client = bench::NewClient(state);
  if (!client) return;
  dfs::DfsClient fs(client.get(), ModeArg(state));
  if (absl::Status s = setup(fs); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  uint64_t i = 0;
  for (auto _ : state) {
    if (absl::Status s = op(fs, i++); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  bench::ReportCounters(state, *client, rt0, bytes0);
}

absl::Status MkdirP(dfs::DfsClient& fs, const std::string& path) {
  absl::Status s = fs.Mkdir(path).status();
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

void BM_DfsCreate(benchmark::State& state) {
  static std::atomic<int> runs{0};  // the benchmark runs several times: a fresh directory each
  std::string dir = absl::StrCat(Dir(state), "/create-", runs++);
  Run(
      state,
      [&](dfs::DfsClient& fs) -> absl::Status {
        ARDMA_RETURN_IF_ERROR(MkdirP(fs, Dir(state)));
        return fs.Mkdir(dir).status();
      },
      [&](dfs::DfsClient& fs, uint64_t i) {
        return fs.Create(absl::StrCat(dir, "/f", i)).status();
      });
}
BENCHMARK(BM_DfsCreate)->ArgName("rdma")->Arg(0)->Arg(1)->UseRealTime();

void BM_DfsLookup(benchmark::State& state) {
  int depth = static_cast<int>(state.range(1));
  std::string path = Dir(state) + "/deep";
  Run(
      state,
      [&](dfs::DfsClient& fs) -> absl::Status {
        ARDMA_RETURN_IF_ERROR(MkdirP(fs, Dir(state)));
        ARDMA_RETURN_IF_ERROR(MkdirP(fs, path));
        for (int d = 1; d < depth; ++d) {
          path += absl::StrCat("/", d);
          ARDMA_RETURN_IF_ERROR(MkdirP(fs, path));
        }
        path += "/file";
        absl::Status s = fs.Create(path).status();
        return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
      },
      [&](dfs::DfsClient& fs, uint64_t) { return fs.Lookup(path).status(); });
}
BENCHMARK(BM_DfsLookup)->ArgNames({"rdma", "depth"})->ArgsProduct({{0, 1}, {1, 4}})->UseRealTime();

void BM_DfsReaddir(benchmark::State& state) {
  std::string dir = Dir(state) + "/hundred";
  Run(
      state,
      [&](dfs::DfsClient& fs) -> absl::Status {
        ARDMA_RETURN_IF_ERROR(MkdirP(fs, Dir(state)));
        ARDMA_RETURN_IF_ERROR(MkdirP(fs, dir));
        for (int i = 0; i < 100; ++i) {
          absl::Status s = fs.Create(absl::StrCat(dir, "/entry", i)).status();
          if (!s.ok() && !absl::IsAlreadyExists(s)) return s;
        }
        return absl::OkStatus();
      },
      [&](dfs::DfsClient& fs, uint64_t) -> absl::Status {
        ARDMA_ASSIGN_OR_RETURN(dfs::DirPage page, fs.ReadDir(dir, 0, 1000));
        return page.entries.size() == 100 ? absl::OkStatus()
                                          : absl::DataLossError("wrong entry count");
      });
}
BENCHMARK(BM_DfsReaddir)->ArgName("rdma")->Arg(0)->Arg(1)->UseRealTime();

void StreamCounters(benchmark::State& state, uint64_t bytes_per_op) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes_per_op));
  if (state.counters.count("round_trips/op") != 0) {
    double per_op = state.counters["round_trips/op"];
    state.counters["round_trips/MiB"] = per_op * (1u << 20) / static_cast<double>(bytes_per_op);
  }
}

void BM_DfsWrite(benchmark::State& state) {
  uint64_t n = static_cast<uint64_t>(state.range(1));
  std::string path = absl::StrCat(Dir(state), "/stream-w-", n);
  std::string data(n, 'w');
  dfs::FileHandle file;
  Run(
      state,
      [&](dfs::DfsClient& fs) -> absl::Status {
        ARDMA_RETURN_IF_ERROR(MkdirP(fs, Dir(state)));
        ARDMA_RETURN_IF_ERROR(fs.Create(path, 0644, /*exclusive=*/false).status());
        ARDMA_ASSIGN_OR_RETURN(file, fs.Open(path));
        return absl::OkStatus();
      },
      [&](dfs::DfsClient& fs, uint64_t i) {
        return fs.WriteAt(file, (i * n) % kStreamFile, data).status();
      });
  StreamCounters(state, n);
}
BENCHMARK(BM_DfsWrite)
    ->ArgNames({"rdma", "bytes"})
    ->ArgsProduct({{0, 1}, {4096, 65536, 1 << 20}})
    ->UseRealTime();

absl::Status MakeStreamFile(dfs::DfsClient& fs, benchmark::State& state, const std::string& path) {
  ARDMA_RETURN_IF_ERROR(MkdirP(fs, Dir(state)));
  absl::StatusOr<uint64_t> len = fs.GetLen(path);
  if (len.ok() && *len == kStreamFile) return absl::OkStatus();
  return fs.WriteFile(path, std::string(kStreamFile, 'r'));
}

void BM_DfsRead(benchmark::State& state) {
  uint64_t n = static_cast<uint64_t>(state.range(1));
  std::string path = absl::StrCat(Dir(state), "/stream-r");
  dfs::FileHandle file;
  Run(
      state,
      [&](dfs::DfsClient& fs) -> absl::Status {
        ARDMA_RETURN_IF_ERROR(MakeStreamFile(fs, state, path));
        ARDMA_ASSIGN_OR_RETURN(file, fs.Open(path));
        return absl::OkStatus();
      },
      [&](dfs::DfsClient& fs, uint64_t i) -> absl::Status {
        ARDMA_ASSIGN_OR_RETURN(std::string got, fs.ReadAt(file, (i * n) % kStreamFile, n));
        return got.size() == n ? absl::OkStatus() : absl::DataLossError("short read");
      });
  StreamCounters(state, n);
}
BENCHMARK(BM_DfsRead)
    ->ArgNames({"rdma", "bytes"})
    ->ArgsProduct({{0, 1}, {4096, 65536, 1 << 20}})
    ->UseRealTime();

void BM_DfsReadPath(benchmark::State& state) {
  constexpr uint64_t n = 65536;
  std::string path = absl::StrCat(Dir(state), "/stream-r");
  Run(
      state, [&](dfs::DfsClient& fs) { return MakeStreamFile(fs, state, path); },
      [&](dfs::DfsClient& fs, uint64_t i) -> absl::Status {
        ARDMA_ASSIGN_OR_RETURN(std::string got, fs.Read(path, (i * n) % kStreamFile, n));
        return got.size() == n ? absl::OkStatus() : absl::DataLossError("short read");
      });
  StreamCounters(state, n);
}
BENCHMARK(BM_DfsReadPath)->ArgName("rdma")->Arg(0)->Arg(1)->UseRealTime();

constexpr uint64_t kCopyBytes = 256u << 20;

void BM_DfsCopy256MiB(benchmark::State& state) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.memory_size = 1ull << 30;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  if (!server.ok()) {
    state.SkipWithError(server.status().ToString().c_str());
    return;
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect((*server)->address());
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  dfs::DfsClient fs(client->get(), Mode::kActive);
  std::string data(kCopyBytes, 'c');
  if (absl::Status s = fs.WriteFile("/big", data); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  // Two untimed rounds first: the copy's blocks come from fresh memory only the first time.
  for (int warm = 0; warm < 2; ++warm) {
    if (!fs.Copy("/big", "/copy").ok() || !fs.Unlink("/copy").ok()) {
      state.SkipWithError("warm-up copy failed");
      return;
    }
  }
  struct rusage before;
  ::getrusage(RUSAGE_SELF, &before);
  for (auto _ : state) {
    absl::StatusOr<dfs::Stat> copied = fs.Copy("/big", "/copy");
    if (!copied.ok() || copied->size != kCopyBytes) {
      state.SkipWithError("copy failed");
      return;
    }
    state.PauseTiming();  // the copy's blocks go back to the heap for the next round
    if (!fs.Unlink("/copy").ok()) state.SkipWithError("unlink failed");
    state.ResumeTiming();
  }
  struct rusage after;
  ::getrusage(RUSAGE_SELF, &after);
  state.counters["page_faults/op"] =
      static_cast<double>(after.ru_minflt - before.ru_minflt) / static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kCopyBytes));
}
BENCHMARK(BM_DfsCopy256MiB)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2);

void BM_Memcpy256MiB(benchmark::State& state) {
  std::string from(kCopyBytes, 'm'), to(kCopyBytes, '\0');  // both touched: no page faults timed
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), kCopyBytes);
    benchmark::DoNotOptimize(to.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kCopyBytes));
}
BENCHMARK(BM_Memcpy256MiB)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
