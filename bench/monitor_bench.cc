// The RDMA load-monitoring paper's micro-benchmarks for the load monitor, all four schemes in one run.
//
// One machine stands in for three (bench/monitor_compare.sh says so with every figure):
//   the back end's host CPUs   CPU 0: ardmad's workers and agent, ardma-monitord, the background
//                              hogs and the application, all at normal priority;
//   the back end's NIC         the last CPU: ardmad's I/O thread (--nic-cpu, --realtime), which
//                              serves READ and runs monitor.sample (RDMA-Sync) next to the data;
//   the front end              the last CPU too, SCHED_FIFO: polls as if from another machine,
//                              so back-end load does not delay it.
// Back ends are separate processes (ardmad, ardma-monitord from this binary's directory).
//
//   BM_Latency/scheme:S/hogs:H      (1) poll latency with H busy threads on the host CPUs;
//                                   counters p50_us, p99_us, round_trips/op, bytes/op
//   BM_Slowdown/scheme:S/interval_ms:G   (2) a CPU-bound application on the host CPUs, polled
//                                   (and, for the async schemes, sampled) every G ms; counters
//                                   slowdown_pct = app time / app time unmonitored - 1 (medians)
//                                   and wait_pct = the extra time the app waited for its CPU
//                                   (schedstat run delay / its CPU time, monitored - unmonitored)
//   BM_Accuracy                     (3) all four schemes at once, every 50 ms, while the host's
//                                   run queue changes every 20 ms; deviation from a 1 ms ground-
//                                   truth sampler: dev_running_<scheme> (tasks), dev_cpu_<scheme>
//                                   (percentage points of host-CPU utilisation)
// Scheme numbers: 0 rdma-sync, 1 rdma-async, 2 socket-sync, 3 socket-async.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "core/status_macros.h"
#include "services/monitor/load_sample.h"
#include "services/monitor/monitor_client.h"

namespace ardma::monitor {
namespace {

int Cpus() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }
int HostCpu() { return 0; }
int NicCpu() { return Cpus() - 1; }

void PinSelf(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// The calling thread becomes the front end: the NIC/front-end CPU, SCHED_FIFO. False if the
// policy was refused (the figures are then marked realtime = 0).
bool BecomeFrontEnd(int priority = 20) {
  PinSelf(NicCpu());
  sched_param p{};
  p.sched_priority = priority;
  return pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
}

// The calling thread becomes an ordinary host thread (threads inherit the creator's policy).
void BecomeHostThread() {
  sched_param p{};
  pthread_setschedparam(pthread_self(), SCHED_OTHER, &p);
  PinSelf(HostCpu());
}

std::string BinDir() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string self(path, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/'));
}

// A child process on the host CPU; SIGTERM and reaped when destroyed.
class Child {
 public:
  explicit Child(std::vector<std::string> argv) {
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the benchmark
      sched_param p{};
      sched_setscheduler(0, SCHED_OTHER, &p);
      PinSelf(HostCpu());
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

 private:
  pid_t pid_ = -1;
};

// A back-end daemon started with --port-file; address() once it listens.
class Daemon {
 public:
  Daemon(std::string binary, std::vector<std::string> flags) {
    port_file_ = absl::StrCat("/tmp/ardma-monitor-bench-", getpid(), "-", counter_++, ".port");
    std::remove(port_file_.c_str());
    std::vector<std::string> argv = {absl::StrCat(BinDir(), "/", binary), "--listen", "127.0.0.1:0",
                                     "--port-file", port_file_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    child_ = std::make_unique<Child>(argv);
    for (int i = 0; i < 500 && address_.empty(); ++i) {
      std::ifstream(port_file_) >> address_;
      if (address_.empty()) absl::SleepFor(absl::Milliseconds(10));
    }
  }
  ~Daemon() { std::remove(port_file_.c_str()); }
  const std::string& address() const { return address_; }

 private:
  static inline int counter_ = 0;
  std::string port_file_;
  std::string address_;
  std::unique_ptr<Child> child_;
};

constexpr std::span<const Scheme> kEveryScheme(kAllSchemes);

// The back ends of the given schemes (only those: a sampler that runs is load); the async ones
// sample every `interval`.
// ARDMA_BENCH_TRANSPORT=ucx: the RDMA schemes poll over UCX (one-sided reads of region 1 that no
// ardmad thread serves), and ardmad then runs without --nic-cpu/--realtime: nothing stands in for
// a NIC's processor, the transport needs none.
bool OverUcx() {
  const char* t = std::getenv("ARDMA_BENCH_TRANSPORT");
  return t != nullptr && std::string(t) == "ucx";
}

struct BackEnds {
  BackEnds(absl::Duration interval, std::span<const Scheme> schemes) {
    auto wants = [&](Scheme s) {
      return std::find(schemes.begin(), schemes.end(), s) != schemes.end();
    };
    if (wants(Scheme::kRdmaSync) || wants(Scheme::kRdmaAsync)) {
      std::vector<std::string> flags = {
          "--io-threads", "1", "--inline-threshold", "10ms", "--memory", "64M", "--quiet"};
      if (!OverUcx()) {
        flags.insert(flags.end(), {"--nic-cpu", std::to_string(NicCpu()), "--realtime"});
      }
      if (wants(Scheme::kRdmaAsync)) {
        flags.insert(flags.end(), {"--monitor-interval", absl::FormatDuration(interval)});
      }
      ardmad = std::make_unique<Daemon>("ardmad", flags);
    }
    if (wants(Scheme::kSocketSync)) {
      monitord_sync = std::make_unique<Daemon>("ardma-monitord", std::vector<std::string>{});
    }
    if (wants(Scheme::kSocketAsync)) {
      monitord_async = std::make_unique<Daemon>(
          "ardma-monitord", std::vector<std::string>{"--interval", absl::FormatDuration(interval)});
    }
  }

  std::string AddressFor(Scheme s) const {
    const std::unique_ptr<Daemon>& d = IsRdma(s)                  ? ardmad
                                       : s == Scheme::kSocketSync ? monitord_sync
                                                                  : monitord_async;
    if (d == nullptr) return "";
    return IsRdma(s) && OverUcx() ? "ucx://" + d->address() : d->address();
  }

  std::unique_ptr<Daemon> ardmad, monitord_sync, monitord_async;
};

// Busy threads on the host CPU, in a child process (this binary, re-executed).
class Hogs {
 public:
  void Set(int n) {
    if (n == n_) return;
    child_.reset();
    n_ = n;
    if (n > 0)
      child_ = std::make_unique<Child>(
          std::vector<std::string>{"/proc/self/exe", absl::StrCat("--ardma-hogs=", n)});
    absl::SleepFor(absl::Milliseconds(100));  // let them start
  }

 private:
  int n_ = 0;
  std::unique_ptr<Child> child_;
};

Hogs& SharedHogs() {
  static Hogs hogs;
  return hogs;
}

// BM_Latency's back ends, kept across its cases and stopped before the other benchmarks (their
// async samplers would be background load there).
std::unique_ptr<BackEnds>& LatencyBackEnds() {
  static std::unique_ptr<BackEnds> backends;
  return backends;
}

std::unique_ptr<Poller> Connect(benchmark::State& state, const BackEnds& b, Scheme scheme) {
  PollerOptions o;
  o.scheme = scheme;
  o.address = b.AddressFor(scheme);
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<Poller>> poller = Poller::Connect(o);
  if (!poller.ok()) {
    state.SkipWithError(poller.status().ToString().c_str());
    return nullptr;
  }
  if (absl::Status s = (*poller)->Poll().status(); !s.ok()) {  // loads the library, reads headers
    state.SkipWithError(s.ToString().c_str());
    return nullptr;
  }
  return *std::move(poller);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// --- (1) latency under background load ---

void BM_Latency(benchmark::State& state) {
  Scheme scheme = kAllSchemes[state.range(0)];
  std::unique_ptr<BackEnds>& backends = LatencyBackEnds();
  if (!backends) backends = std::make_unique<BackEnds>(absl::Milliseconds(10), kEveryScheme);
  bool realtime = BecomeFrontEnd();
  SharedHogs().Set(static_cast<int>(state.range(1)));
  std::unique_ptr<Poller> poller = Connect(state, *backends, scheme);
  if (!poller) return;
  Poller::Traffic t0 = poller->traffic();
  std::vector<double> us;
  for (auto _ : state) {
    absl::Time start = absl::Now();
    absl::StatusOr<LoadSample> s = poller->Poll();
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    if (!s.ok()) {
      state.SkipWithError(s.status().ToString().c_str());
      break;
    }
  }
  Poller::Traffic t1 = poller->traffic();
  double n = static_cast<double>(us.size());
  state.counters["p50_us"] = Percentile(us, 0.5);
  state.counters["p99_us"] = Percentile(us, 0.99);
  state.counters["round_trips/op"] = (t1.round_trips - t0.round_trips) / n;
  state.counters["bytes/op"] = (t1.bytes - t0.bytes) / n;
  state.counters["realtime"] = realtime;
  state.SetLabel(SchemeName(scheme));
}

// --- (2) application slowdown vs monitoring granularity ---

struct AppRun {
  double seconds = 0;   // wall time
  double wait_pct = 0;  // time runnable but not running (another host thread had the CPU), as a
                        // share of its CPU time: /proc/thread-self/schedstat. Unlike wall time,
                        // it does not count the hypervisor's steal from this shared VM.
};

// Fixed floating-point work on the host CPU, at normal priority.
AppRun RunApplication() {
  AppRun run;
  std::thread app([&] {
    BecomeHostThread();
    auto schedstat = [] {
      uint64_t cpu = 0, wait = 0;
      std::ifstream("/proc/thread-self/schedstat") >> cpu >> wait;
      return std::pair(cpu, wait);
    };
    auto [cpu0, wait0] = schedstat();
    absl::Time start = absl::Now();
    volatile double x = 1.0;
    for (int i = 0; i < 60'000'000; ++i) x = x * 1.0000001 + 1e-9;
    run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    auto [cpu1, wait1] = schedstat();
    run.wait_pct = cpu1 > cpu0 ? 100.0 * (wait1 - wait0) / (cpu1 - cpu0) : 0;
  });
  app.join();
  return run;
}

void BM_Slowdown(benchmark::State& state) {
  Scheme scheme = kAllSchemes[state.range(0)];
  absl::Duration interval = absl::Milliseconds(state.range(1));
  bool realtime = BecomeFrontEnd();
  SharedHogs().Set(0);
  LatencyBackEnds().reset();
  std::vector<double> plain, monitored, plain_wait, monitored_wait;
  for (auto _ : state) {
    // Unmonitored: no back end running at all.
    AppRun alone = RunApplication();
    plain.push_back(alone.seconds);
    plain_wait.push_back(alone.wait_pct);
    BackEnds backends(interval, std::span<const Scheme>(&scheme, 1));
    std::unique_ptr<Poller> poller = Connect(state, backends, scheme);
    if (!poller) return;
    std::atomic<bool> stop{false};
    std::thread front([&] {
      BecomeFrontEnd();
      absl::Time next = absl::Now();
      while (!stop.load()) {
        (void)poller->Poll();
        next += interval;
        while (!stop.load() && absl::Now() < next) {
          absl::SleepFor(std::min(absl::Milliseconds(1), next - absl::Now()));
        }
      }
    });
    AppRun run = RunApplication();
    monitored.push_back(run.seconds);
    monitored_wait.push_back(run.wait_pct);
    stop = true;
    front.join();
  }
  double base = Percentile(plain, 0.5), with = Percentile(monitored, 0.5);
  state.counters["app_s"] = base;
  state.counters["slowdown_pct"] = 100 * (with / base - 1);
  state.counters["wait_pct"] = Percentile(monitored_wait, 0.5) - Percentile(plain_wait, 0.5);
  state.counters["realtime"] = realtime;
  state.SetLabel(SchemeName(scheme));
}

// --- (3) accuracy against a 1 ms ground truth ---

struct Truth {
  int64_t t = 0;  // monotonic ns
  uint64_t running = 0;
  uint64_t busy = 0, total = 0;  // host-CPU ticks
};

struct Observation {
  int64_t t = 0;  // when the front end got it
  LoadSample sample;
};

// The host CPU's busy share over [from, to] by the ground truth's tick counts.
double TruthBusy(const std::vector<Truth>& truth, int64_t from, int64_t to) {
  auto at = [&](int64_t t) {
    auto it = std::upper_bound(truth.begin(), truth.end(), t,
                               [](int64_t x, const Truth& r) { return x < r.t; });
    return it == truth.begin() ? truth.front() : *(it - 1);
  };
  Truth a = at(from), b = at(to);
  uint64_t total = b.total - a.total;
  return total ? static_cast<double>(b.busy - a.busy) / total : 0;
}

void BM_Accuracy(benchmark::State& state) {
  constexpr absl::Duration kPoll = absl::Milliseconds(50);
  constexpr absl::Duration kRun = absl::Seconds(6);
  bool realtime = BecomeFrontEnd();
  SharedHogs().Set(0);
  LatencyBackEnds().reset();
  BackEnds backends(kPoll, kEveryScheme);
  for (auto _ : state) {
    Child pattern({"/proc/self/exe", "--ardma-hog-pattern=6"});
    std::vector<Truth> truth;
    std::vector<std::vector<Observation>> seen(4);
    std::atomic<bool> stop{false};
    std::thread ground([&] {
      BecomeFrontEnd(40);
      ProcSampler sampler;
      absl::Time next = absl::Now();
      while (!stop.load()) {
        absl::StatusOr<LoadSample> s = sampler.Sample();
        if (s.ok() && !s->cpus.empty()) {
          const CpuTimes& c = s->cpus[HostCpu()];
          truth.push_back(
              {s->monotonic_ns, (*s)[Field::kProcsRunning], c.Total() - c.Idle(), c.Total()});
        }
        next += absl::Milliseconds(1);
        absl::SleepFor(next - absl::Now());
      }
    });
    std::vector<std::thread> fronts;
    for (int k = 0; k < 4; ++k) {
      std::unique_ptr<Poller> poller = Connect(state, backends, kAllSchemes[k]);
      if (!poller) break;
      fronts.emplace_back([&, k, p = std::shared_ptr<Poller>(std::move(poller))] {
        BecomeFrontEnd();
        absl::Time next = absl::Now();
        while (!stop.load()) {
          absl::StatusOr<LoadSample> s = p->Poll();
          timespec ts;
          clock_gettime(CLOCK_MONOTONIC, &ts);
          if (s.ok()) seen[k].push_back({ts.tv_sec * 1000000000ll + ts.tv_nsec, *std::move(s)});
          next += kPoll;
          absl::SleepFor(next - absl::Now());
        }
      });
    }
    absl::SleepFor(kRun);
    stop = true;
    for (std::thread& f : fronts) f.join();
    ground.join();
    if (truth.size() < 100) {
      state.SkipWithError("ground truth sampler fell behind");
      return;
    }
    for (int k = 0; k < 4; ++k) {
      double dev_running = 0, dev_cpu = 0;
      int n = 0;
      for (size_t i = 2; i < seen[k].size(); ++i) {  // skip the first (no previous sample)
        const Observation& o = seen[k][i];
        const LoadSample& prev = seen[k][i - 1].sample;
        if (o.t <= truth.front().t || prev.sequence == o.sample.sequence) continue;
        Truth now = *(std::upper_bound(truth.begin(), truth.end(), o.t,
                                       [](int64_t x, const Truth& r) { return x < r.t; }) -
                      1);
        dev_running += std::fabs(static_cast<double>(o.sample[Field::kProcsRunning]) -
                                 static_cast<double>(now.running));
        const CpuTimes& a = prev.cpus[HostCpu()];
        const CpuTimes& b = o.sample.cpus[HostCpu()];
        uint64_t total = b.Total() - a.Total();
        double reported =
            total ? static_cast<double>((b.Total() - b.Idle()) - (a.Total() - a.Idle())) / total
                  : 0;
        int64_t window = o.sample.monotonic_ns - prev.monotonic_ns;
        dev_cpu += 100 * std::fabs(reported - TruthBusy(truth, o.t - window, o.t));
        ++n;
      }
      std::string name = SchemeName(kAllSchemes[k]);
      std::replace(name.begin(), name.end(), '-', '_');
      state.counters["dev_running_" + name] = n ? dev_running / n : -1;
      state.counters["dev_cpu_" + name] = n ? dev_cpu / n : -1;
      state.counters["polls_" + name] = n;
    }
  }
  state.counters["realtime"] = realtime;
}

BENCHMARK(BM_Latency)
    ->ArgNames({"scheme", "hogs"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2, 4, 8}})
    ->Iterations(400)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Slowdown)
    ->ArgNames({"scheme", "interval_ms"})
    ->ArgsProduct({{0, 1, 2, 3}, {1, 4, 16, 64, 256, 1024}})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Accuracy)->Iterations(1)->Unit(benchmark::kSecond);

// --ardma-hogs=N: N threads spinning. --ardma-hog-pattern=N: N threads, of which a random
// number (fixed seed) spin during each 20 ms period while the rest sleep.
[[noreturn]] void RunHogs(int n, bool pattern) {
  std::atomic<int> active{n};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&active, i] {
      volatile uint64_t x = 0;
      for (;;) {
        if (i < active.load(std::memory_order_relaxed)) {
          x = x + 1;
        } else {
          absl::SleepFor(absl::Microseconds(500));
        }
      }
    });
  }
  std::mt19937 rng(42);
  for (;;) {
    absl::SleepFor(absl::Milliseconds(20));
    if (pattern) active = std::uniform_int_distribution<int>(0, n)(rng);
  }
}

}  // namespace
}  // namespace ardma::monitor

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    int n = 0;
    if (std::sscanf(argv[i], "--ardma-hogs=%d", &n) == 1) ardma::monitor::RunHogs(n, false);
    if (std::sscanf(argv[i], "--ardma-hog-pattern=%d", &n) == 1) ardma::monitor::RunHogs(n, true);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
