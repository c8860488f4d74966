// The lock service: uncontended latency (active vs RDMA), and contended throughput, wait times and
// fairness with 2..32 clients, beside the common Redis lock recipe (SET name token NX PX, release
// by a Lua script that deletes only its own token) when ARDMA_BENCH_REDIS=host:port names a
// redis-server (bench/lock_compare.sh starts one).
//
//   BM_LockUncontended/rdma:{0,1}            acquire + release of a free lock, one client
//   BM_LockContended/rdma:{0,1}/clients:N    N clients, each acquiring and releasing one lock
//                                            kOpsPerClient times as fast as it can
//   BM_RedisLockUncontended, BM_RedisLockContended/clients:N   the Redis recipe, same shapes
//
// Contended figures (per iteration, manual time = wall time of all clients' operations):
// items_per_second (grants/s), wait_p50_us / wait_p99_us (Acquire call to grant), fairness (the
// slowest client's mean wait over the fastest's: 1 is perfectly fair), round_trips/op.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_support.h"
#include "bench/resp_client.h"
#include "benchmark/benchmark.h"
#include "services/lock/lock_client.h"

namespace ardma {
namespace {

constexpr int kOpsPerClient = 100;

Mode ModeArg(benchmark::State& state) { return state.range(0) == 0 ? Mode::kActive : Mode::kRdma; }

struct ContendedStats {
  std::vector<double> waits_us;     // every acquisition's wait
  std::vector<double> mean_wait_us;  // per client
};

void Report(benchmark::State& state, const ContendedStats& s) {
  std::vector<double> waits = s.waits_us;
  std::sort(waits.begin(), waits.end());
  auto pct = [&](double p) {
    return waits.empty() ? 0 : waits[std::min(waits.size() - 1, static_cast<size_t>(p * waits.size()))];
  };
  state.counters["wait_p50_us"] = pct(0.50);
  state.counters["wait_p99_us"] = pct(0.99);
  auto [lo, hi] = std::minmax_element(s.mean_wait_us.begin(), s.mean_wait_us.end());
  state.counters["fairness"] = *lo > 0 ? *hi / *lo : 0;
}

// Runs `clients` threads; thread i calls op(i) kOpsPerClient times, timing each call.
template <typename Op>
absl::Status RunClients(benchmark::State& state, int clients, Op op, ContendedStats* stats) {
  std::vector<std::vector<double>> waits(clients);
  std::atomic<bool> failed{false};
  std::string first_error;
  absl::Mutex mu;
  absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kOpsPerClient && !failed; ++i) {
        absl::Time t0 = absl::Now();
        absl::Status s = op(c, t0, &waits[c]);
        if (!s.ok()) {
          absl::MutexLock lock(&mu);
          if (!failed.exchange(true)) first_error = s.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
  if (failed) return absl::InternalError(first_error);
  for (auto& w : waits) {
    double sum = 0;
    for (double x : w) sum += x;
    stats->mean_wait_us.push_back(w.empty() ? 0 : sum / static_cast<double>(w.size()));
    stats->waits_us.insert(stats->waits_us.end(), w.begin(), w.end());
  }
  return absl::OkStatus();
}

void BM_LockUncontended(benchmark::State& state) {
  auto client = bench::NewClient(state);
  if (!client) return;
  lock::LockClient locks(client.get(), ModeArg(state));
  std::string name = absl::StrCat("uncontended-", state.range(0));
  auto cycle = [&]() -> bool {
    absl::StatusOr<lock::Grant> g = locks.Acquire(name, lock::LockMode::kExclusive, absl::Seconds(10));
    return g.ok() && locks.Release(*g).ok();
  };
  if (!cycle()) {  // ships the code, creates the lock, caches its address
    state.SkipWithError("lock setup failed");
    return;
  }
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  for (auto _ : state) {
    if (!cycle()) {
      state.SkipWithError("acquire/release failed");
      break;
    }
  }
  bench::ReportCounters(state, *client, rt0, bytes0);
}
BENCHMARK(BM_LockUncontended)->ArgName("rdma")->Arg(0)->Arg(1);

void BM_LockContended(benchmark::State& state) {
  Mode mode = ModeArg(state);
  int clients = static_cast<int>(state.range(1));
  std::vector<std::unique_ptr<Client>> conns;
  std::vector<std::unique_ptr<lock::LockClient>> locks;
  for (int c = 0; c < clients; ++c) {
    conns.push_back(bench::NewClient(state));
    if (!conns.back()) return;
    locks.push_back(std::make_unique<lock::LockClient>(conns.back().get(), mode));
  }
  std::string name = absl::StrCat("contended-", state.range(0), "-", clients);
  for (auto& l : locks) {  // warm up every client
    absl::StatusOr<lock::Grant> g = l->Acquire(name, lock::LockMode::kExclusive, absl::Seconds(30));
    if (!g.ok() || !l->Release(*g).ok()) {
      state.SkipWithError("lock setup failed");
      return;
    }
  }
  uint64_t rt0 = 0;
  for (auto& c : conns) rt0 += c->counters().round_trips;
  ContendedStats stats;
  for (auto _ : state) {
    absl::Status s = RunClients(
        state, clients,
        [&](int c, absl::Time t0, std::vector<double>* waits) -> absl::Status {
          absl::StatusOr<lock::Grant> g =
              locks[c]->Acquire(name, lock::LockMode::kExclusive, absl::Seconds(60));
          if (!g.ok()) return g.status();
          waits->push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
          return locks[c]->Release(*g);
        },
        &stats);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  uint64_t rt = 0;
  for (auto& c : conns) rt += c->counters().round_trips;
  double ops = static_cast<double>(state.iterations()) * clients * kOpsPerClient;
  state.SetItemsProcessed(static_cast<int64_t>(ops));
  state.counters["round_trips/op"] = static_cast<double>(rt - rt0) / ops;
  Report(state, stats);
}
BENCHMARK(BM_LockContended)
    ->ArgNames({"rdma", "clients"})
    ->ArgsProduct({{0, 1}, {2, 4, 8, 16, 32}})
    ->UseManualTime()
    ->Iterations(3);

// ---- The Redis recipe ----

constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

std::unique_ptr<bench::RespClient> RedisClient(benchmark::State& state) {
  const char* address = std::getenv("ARDMA_BENCH_REDIS");
  if (address == nullptr) {
    state.SkipWithError("set ARDMA_BENCH_REDIS=host:port (bench/lock_compare.sh does)");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<bench::RespClient>> c = bench::RespClient::Connect(address);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*c);
}

// SET NX PX until it succeeds (backing off 50 us doubling to 1 ms), then EVALSHA the release.
class RedisLock {
 public:
  explicit RedisLock(bench::RespClient* redis, std::string owner)
      : redis_(redis), owner_(std::move(owner)) {}
  absl::Status Load() {
    absl::StatusOr<bench::RespReply> sha = redis_->Command({"SCRIPT", "LOAD", kReleaseScript});
    if (!sha.ok()) return sha.status();
    sha_ = sha->text;
    return absl::OkStatus();
  }
  absl::Status Acquire(std::string_view name) {
    token_ = absl::StrCat(owner_, ":", ++count_);
    absl::Duration backoff = absl::Microseconds(50);
    for (;;) {
      absl::StatusOr<bench::RespReply> r =
          redis_->Command({"SET", name, token_, "NX", "PX", "10000"});
      if (!r.ok()) return r.status();
      ++round_trips_;
      if (r->type == bench::RespReply::Type::kStatus) return absl::OkStatus();
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(1));
    }
  }
  absl::Status Release(std::string_view name) {
    ++round_trips_;
    absl::StatusOr<bench::RespReply> r = redis_->Command({"EVALSHA", sha_, "1", name, token_});
    if (!r.ok()) return r.status();
    if (r->integer != 1) return absl::FailedPreconditionError("redis lock was not ours");
    return absl::OkStatus();
  }
  uint64_t round_trips() const { return round_trips_; }

 private:
  bench::RespClient* redis_;
  std::string owner_, sha_, token_;
  uint64_t count_ = 0, round_trips_ = 0;
};

void BM_RedisLockUncontended(benchmark::State& state) {
  std::unique_ptr<bench::RespClient> redis = RedisClient(state);
  if (!redis) return;
  RedisLock lock(redis.get(), "solo");
  if (!lock.Load().ok()) {
    state.SkipWithError("SCRIPT LOAD failed");
    return;
  }
  for (auto _ : state) {
    if (!lock.Acquire("redis-uncontended").ok() || !lock.Release("redis-uncontended").ok()) {
      state.SkipWithError("redis lock failed");
      break;
    }
  }
  state.counters["round_trips/op"] =
      static_cast<double>(lock.round_trips()) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_RedisLockUncontended);

void BM_RedisLockContended(benchmark::State& state) {
  int clients = static_cast<int>(state.range(0));
  std::vector<std::unique_ptr<bench::RespClient>> conns;
  std::vector<std::unique_ptr<RedisLock>> locks;
  for (int c = 0; c < clients; ++c) {
    conns.push_back(RedisClient(state));
    if (!conns.back()) return;
    locks.push_back(std::make_unique<RedisLock>(conns.back().get(), absl::StrCat("c", c)));
    if (!locks.back()->Load().ok()) {
      state.SkipWithError("SCRIPT LOAD failed");
      return;
    }
  }
  std::string name = absl::StrCat("redis-contended-", clients);
  ContendedStats stats;
  for (auto _ : state) {
    absl::Status s = RunClients(
        state, clients,
        [&](int c, absl::Time t0, std::vector<double>* waits) -> absl::Status {
          absl::Status a = locks[c]->Acquire(name);
          if (!a.ok()) return a;
          waits->push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
          return locks[c]->Release(name);
        },
        &stats);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  uint64_t rt = 0;
  for (auto& l : locks) rt += l->round_trips();
  double ops = static_cast<double>(state.iterations()) * clients * kOpsPerClient;
  state.SetItemsProcessed(static_cast<int64_t>(ops));
  state.counters["round_trips/op"] = static_cast<double>(rt) / ops;
  Report(state, stats);
}
BENCHMARK(BM_RedisLockContended)
    ->ArgName("clients")
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->UseManualTime()
    ->Iterations(3);

}  // namespace
}  // namespace ardma

BENCHMARK_MAIN();
