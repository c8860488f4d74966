// ardma-monitor: the load monitor's front end. Polls back ends by one of the RDMA load-monitoring paper's schemes and
// shows their load live (a table on a terminal, lines otherwise), marks the back end a balancer
// would pick, and can serve the samples to Prometheus.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "core/cli/daemon_support.h"
#include "core/cli/client_flags.h"
#include "core/cluster/admin.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "core/status_macros.h"
#include "services/monitor/monitor_client.h"
#include "services/monitor/monitor_view.h"

namespace {

using ardma::monitor::BackendState;
using ardma::monitor::Balancer;
using ardma::monitor::Poller;
using ardma::monitor::PollerOptions;

constexpr char kUsage[] =
    "Usage: ardma-monitor --backends HOST:PORT,...|etcd://HOST:PORT/NAME [flags]\n"
    "\n"
    "Polls the load of back ends (the RDMA load-monitoring paper) and shows it live: a table on a terminal, one line\n"
    "per back end and poll otherwise. Schemes:\n"
    "  rdma-sync     ardmad samples /proc when the request lands (one EXECUTE; the default)\n"
    "  rdma-async    one READ of the sample ardmad --monitor-interval T publishes\n"
    "  socket-sync   ardma-monitord samples /proc when asked\n"
    "  socket-async  ardma-monitord --interval T answers its latest sample\n"
    "The back end marked * is the one the balancer (--balance) would send the next request to.\n"
    "A cluster's etcd:// address stands for its members (rdma schemes): members that join are\n"
    "polled from then on, members that leave are no longer polled nor picked.\n"
    "Exit status: 0, or 1 if the last poll of some back end failed (with --count).";

struct Shared {
  absl::Mutex mu;
  std::vector<BackendState> backends ABSL_GUARDED_BY(mu);
  std::unique_ptr<Balancer> balancer ABSL_GUARDED_BY(mu);
  int finished ABSL_GUARDED_BY(mu) = 0;  // pollers done with --count rounds
  bool stop ABSL_GUARDED_BY(mu) = false;
  // Line output: each poll prints its own line (so --count N gives exactly N per back end), and
  // a "pick" line follows whenever new lines came.
  bool print_lines = false;
  uint64_t lines_since_pick ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::thread> pollers ABSL_GUARDED_BY(mu);  // one per back end ever polled
};

void PollLoop(Shared& shared, size_t index, PollerOptions options, absl::Duration interval,
              int64_t count) {
  std::unique_ptr<Poller> poller;
  absl::Time next = absl::Now();
  auto ended = [&shared, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared.mu) {
    return shared.stop || shared.backends[index].left;
  };
  for (int64_t round = 0; count == 0 || round < count; ++round) {
    {
      absl::MutexLock lock(&shared.mu);
      if (ended()) break;  // it left the cluster
    }
    absl::Time start = absl::Now();
    absl::StatusOr<ardma::monitor::LoadSample> sample;
    if (!poller) {
      absl::StatusOr<std::unique_ptr<Poller>> connected = Poller::Connect(options);
      if (connected.ok())
        poller = *std::move(connected);
      else
        sample = connected.status();
    }
    if (poller) sample = poller->Poll();
    absl::Duration latency = absl::Now() - start;
    {
      absl::MutexLock lock(&shared.mu);
      BackendState& b = shared.backends[index];
      ++b.polls;
      b.latency = latency;
      if (sample.ok()) {
        shared.balancer->Update(index, *sample);
        b.figures = *shared.balancer->figures(index);
        b.load = shared.balancer->Load(index);
        b.sample = *std::move(sample);
        b.error.clear();
      } else {
        ++b.failures;
        shared.balancer->MarkDown(index);
        b.load.reset();
        b.error = std::string(sample.status().message());
      }
      if (shared.print_lines) {  // a failed poll is an error: on stderr, as the tool's
        (b.error.empty() ? std::cout : std::cerr << "ardma-monitor: ")
            << ardma::monitor::LineText(b) << "\n"
            << std::flush;
        ++shared.lines_since_pick;
      }
      next = std::max(next + interval, absl::Now());
      if (shared.mu.AwaitWithDeadline(absl::Condition(&ended), next) && shared.stop) return;
    }
  }
  absl::MutexLock lock(&shared.mu);
  ++shared.finished;
}

// Starts polling back end `address`.
void StartPoller(Shared& shared, const std::string& address, PollerOptions options,
                 absl::Duration interval, int64_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared.mu) {
  size_t index = shared.balancer->Add();
  BackendState& b = shared.backends.emplace_back();
  b.address = address;
  b.scheme = options.scheme;
  options.address = address;
  shared.pollers.emplace_back(PollLoop, std::ref(shared), index, options, interval, count);
}

// The addresses of cluster `where`'s live members (tcp, else tls), by member id.
absl::StatusOr<std::map<std::string, std::string>> MemberAddresses(
    ardma::cluster::EtcdClient& etcd, const ardma::cluster::ClusterAddress& where) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<ardma::cluster::MemberInfo> members,
                         ardma::cluster::ListMembers(etcd, where.name));
  std::map<std::string, std::string> out;
  for (const ardma::cluster::MemberInfo& m : members) {
    for (const char* transport : {"tcp", "tls"}) {
      auto it = m.addresses.find(transport);
      if (it != m.addresses.end() && out.find(m.id) == out.end()) out[m.id] = it->second;
    }
  }
  return out;
}

// A cluster named among --backends: its members are back ends while they are members.
struct Watched {
  ardma::cluster::ClusterAddress where;
  std::unique_ptr<ardma::cluster::EtcdClient> etcd;
  std::map<std::string, std::string> members;  // id -> address, as last read
};

// Reads each watched cluster's members every `period` until stop: a member that joined is polled,
// one that left is marked so (its poller ends). etcd away: the members stay as last read.
void FollowMembers(Shared& shared, std::vector<Watched>& clusters, PollerOptions options,
                   absl::Duration interval, int64_t count, absl::Duration period) {
  for (;;) {
    {
      absl::MutexLock lock(&shared.mu);
      if (shared.mu.AwaitWithTimeout(absl::Condition(&shared.stop), period)) return;
    }
    for (Watched& c : clusters) {
      absl::StatusOr<std::map<std::string, std::string>> now = MemberAddresses(*c.etcd, c.where);
      if (!now.ok()) continue;
      absl::MutexLock lock(&shared.mu);
      for (const auto& [id, address] : *now) {
        auto was = c.members.find(id);
        if (was != c.members.end() && was->second == address) continue;
        StartPoller(shared, address, options, interval, count);  // joined, or came back elsewhere
      }
      for (const auto& [id, address] : c.members) {
        auto is = now->find(id);
        if (is != now->end() && is->second == address) continue;
        for (BackendState& b : shared.backends) {
          if (b.address == address && !b.left) {
            b.left = true;
            if (shared.print_lines) std::cout << ardma::monitor::LineText(b) << "\n" << std::flush;
          }
        }
        for (size_t i = 0; i < shared.backends.size(); ++i) {
          if (shared.backends[i].left) shared.balancer->MarkDown(i);
        }
      }
      c.members = *std::move(now);
    }
  }
}

int Main(int argc, char** argv) {
  std::string backends_flag, scheme_flag = "rdma-sync", procfs, prometheus, balance = "least";
  absl::Duration interval = absl::Seconds(1);
  int64_t count = 0;
  bool lines = false;
  ardma::FlagSet flags("ardma-monitor", kUsage);
  flags.String("backends", &backends_flag, "LIST",
               "comma-separated back ends: ardmad addresses for the rdma schemes, ardma-monitord "
               "addresses for the socket ones");
  flags.String("scheme", &scheme_flag, "SCHEME",
               "rdma-sync, rdma-async, socket-sync or socket-async");
  flags.Duration("interval", &interval, "time between polls of each back end (e.g. 50ms)");
  flags.Int("count", &count, "N", "stop after N polls of each back end; 0 = until interrupted");
  flags.String("procfs", &procfs, "PATH", "rdma-sync: the procfs the back ends sample");
  flags.String("balance", &balance, "POLICY",
               "least (least weighted load) or p2c (power of two choices)");
  flags.String("prometheus", &prometheus, "[HOST]:PORT",
               "serve the samples in Prometheus text format at http://HOST:PORT/metrics");
  flags.Bool("lines", &lines, "print lines even on a terminal");
  ardma::ClientFlags credentials;  // the back ends are named by --backends
  credentials.DeclareCredentials(flags);
  std::vector<std::string> positional;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &positional)) {
    return *exit_code;
  }
  auto usage_error = [](const std::string& message) {
    std::cerr << "ardma-monitor: " << message << " (see --help)\n";
    return 2;
  };
  if (!positional.empty()) return usage_error("unexpected argument '" + positional[0] + "'");
  if (absl::Status s = credentials.Export(); !s.ok()) {
    return usage_error(std::string(s.message()));
  }
  std::vector<std::string> addresses = absl::StrSplit(backends_flag, ',', absl::SkipEmpty());
  if (addresses.empty()) return usage_error("--backends is required");
  absl::StatusOr<ardma::monitor::Scheme> scheme = ardma::monitor::ParseScheme(scheme_flag);
  if (!scheme.ok()) return usage_error(std::string(scheme.status().message()));
  // A cluster's address (etcd://HOST:PORT[,HOST:PORT...]/NAME: its endpoints are separated by
  // commas too, so it takes the rest of the list) stands for its members.
  std::vector<Watched> clusters;
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (!ardma::cluster::IsClusterAddress(addresses[i])) continue;
    std::string whole = absl::StrJoin(addresses.begin() + i, addresses.end(), ",");
    addresses.resize(i);
    absl::StatusOr<ardma::cluster::ClusterAddress> where =
        ardma::cluster::ParseClusterAddress(whole);
    if (!where.ok()) return usage_error(std::string(where.status().message()));
    if (*scheme != ardma::monitor::Scheme::kRdmaSync &&
        *scheme != ardma::monitor::Scheme::kRdmaAsync) {
      return usage_error("a cluster's members are polled by an rdma scheme only");
    }
    Watched& c = clusters.emplace_back();
    c.where = *where;
    absl::StatusOr<std::unique_ptr<ardma::cluster::EtcdClient>> etcd =
        ardma::cluster::EtcdClient::Connect(where->endpoints);
    absl::StatusOr<std::map<std::string, std::string>> members =
        etcd.ok() ? MemberAddresses(**etcd, *where)
                  : absl::StatusOr<std::map<std::string, std::string>>(etcd.status());
    if (!members.ok()) {
      std::cerr << "ardma-monitor: " << whole << ": " << members.status().message() << "\n";
      return 1;
    }
    c.etcd = *std::move(etcd);
    c.members = *members;
    for (const auto& [id, address] : *members) addresses.push_back(address);
    break;
  }
  if (interval < absl::Milliseconds(1)) return usage_error("--interval must be at least 1ms");
  if (count < 0) return usage_error("--count must not be negative");
  if (balance != "least" && balance != "p2c") {
    return usage_error("--balance must be least or p2c");
  }

  ardma::StopSignals stop;  // before the pollers start, so they inherit the mask

  Shared shared;
  {
    absl::MutexLock lock(&shared.mu);
    shared.balancer = std::make_unique<Balancer>(0);
  }
  std::unique_ptr<ardma::monitor::MetricsServer> metrics;
  if (!prometheus.empty()) {
    absl::StatusOr<std::unique_ptr<ardma::monitor::MetricsServer>> started =
        ardma::monitor::MetricsServer::Start(prometheus, [&shared] {
          absl::MutexLock lock(&shared.mu);
          return ardma::monitor::PrometheusText(shared.backends);
        });
    if (!started.ok()) {
      std::cerr << "ardma-monitor: --prometheus: " << started.status().message() << "\n";
      return 1;
    }
    metrics = *std::move(started);
    std::cerr << "ardma-monitor: Prometheus metrics at http://" << metrics->address()
              << "/metrics\n";
  }
  const bool table = !lines && isatty(STDOUT_FILENO);
  shared.print_lines = !table;
  PollerOptions options;
  options.scheme = *scheme;
  options.procfs = procfs;
  options.timeout = std::max(absl::Seconds(1), 2 * interval);
  {
    absl::MutexLock lock(&shared.mu);
    for (const std::string& address : addresses) {
      StartPoller(shared, address, options, interval, count);
    }
  }
  std::thread follower;
  if (!clusters.empty()) {
    follower = std::thread(FollowMembers, std::ref(shared), std::ref(clusters), options, interval,
                           count, std::clamp(interval, absl::Milliseconds(100), absl::Seconds(1)));
  }

  // A table is redrawn at most 10 times a second; lines come once per interval.
  const absl::Duration refresh = table ? std::max(interval, absl::Milliseconds(100)) : interval;
  bool done = false;
  while (!done) {
    bool interrupted = stop.WaitFor(refresh).has_value();
    absl::MutexLock lock(&shared.mu);
    done = interrupted ||
           (count > 0 && shared.finished == static_cast<int>(shared.pollers.size()));
    absl::StatusOr<size_t> pick =
        balance == "p2c" ? shared.balancer->PowerOfTwo() : shared.balancer->LeastLoaded();
    std::optional<size_t> marked;
    if (pick.ok()) marked = *pick;
    if (table) {
      std::cout << "\x1b[H\x1b[2J" << ardma::monitor::TableText(shared.backends, marked)
                << std::flush;
    } else if (marked && shared.lines_since_pick > 0) {
      std::cout << "pick " << shared.backends[*marked].address << "\n" << std::flush;
      shared.lines_since_pick = 0;
    }
    if (done) shared.stop = true;
  }
  if (follower.joinable()) follower.join();
  std::vector<std::thread> pollers;
  {
    absl::MutexLock lock(&shared.mu);
    pollers.swap(shared.pollers);  // (none starts any more: the follower has ended)
  }
  for (std::thread& t : pollers) t.join();
  if (metrics) metrics->Stop();
  absl::MutexLock lock(&shared.mu);
  for (const BackendState& b : shared.backends) {
    if (count > 0 && !b.left && !b.error.empty()) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
