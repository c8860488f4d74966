// The load monitor's front end: polls back ends by one of the RDMA load-monitoring paper's four schemes, and balances
// requests over them by what it read.
//
//   Scheme        how a poll gets a sample                      back-end side
//   rdma-sync     EXECUTE monitor.sample: /proc read on the     ardmad (the library is shipped
//                 server's I/O thread when the request lands    on first use)
//   rdma-async    one READ of the agent's published region      ardmad --monitor-interval T
//   socket-sync   'S' to ardma-monitord: it reads /proc now     ardma-monitord
//   socket-async  'A' to ardma-monitord: its calculating        ardma-monitord --interval T
//                 thread's latest sample
//
//   ARDMA_ASSIGN_OR_RETURN(auto poller, Poller::Connect({.address = "10.0.0.2:15712",
//                                                        .scheme = Scheme::kRdmaSync}));
//   ARDMA_ASSIGN_OR_RETURN(LoadSample sample, poller->Poll());
//
//   Balancer balancer(3);
//   balancer.Update(0, sample0); ...
//   size_t target = balancer.LeastLoaded();   // or balancer.PowerOfTwo()
//
// A Poller is used by one thread at a time; a Balancer is not thread-safe either.
#ifndef ARDMA_SERVICES_MONITOR_MONITOR_CLIENT_H_
#define ARDMA_SERVICES_MONITOR_MONITOR_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/wire/messages.h"
#include "services/monitor/load_sample.h"

namespace ardma::monitor {

enum class Scheme { kRdmaSync, kRdmaAsync, kSocketSync, kSocketAsync };
inline constexpr Scheme kAllSchemes[] = {Scheme::kRdmaSync, Scheme::kRdmaAsync,
                                         Scheme::kSocketSync, Scheme::kSocketAsync};
const char* SchemeName(Scheme scheme);  // "rdma-sync", ...
absl::StatusOr<Scheme> ParseScheme(std::string_view text);
inline bool IsRdma(Scheme s) { return s == Scheme::kRdmaSync || s == Scheme::kRdmaAsync; }

// The agent's region when ardmad runs --monitor-interval (its only extra region).
inline constexpr wire::RegionId kMonitorRegion = 1;

struct PollerOptions {
  std::string address;  // ardmad for the rdma schemes, ardma-monitord for the socket ones
  Scheme scheme = Scheme::kRdmaSync;
  std::string procfs;   // rdma-sync only: the server reads this procfs (empty: /proc)
  wire::RegionId region = kMonitorRegion;  // rdma-async only
  absl::Duration timeout = absl::Seconds(5);
  // rdma-async: a READ that finds both slots torn is retried this many times.
  int torn_retries = 100;
};

class Poller {
 public:
  static absl::StatusOr<std::unique_ptr<Poller>> Connect(const PollerOptions& options);
  virtual ~Poller() = default;
  const PollerOptions& options() const { return options_; }
  // One round trip (rdma-async: one READ, after a first poll that also reads the region's
  // header). Errors: UNAVAILABLE (back end unreachable), FAILED_PRECONDITION (the back end does
  // not offer the scheme), DATA_LOSS (not a sample).
  virtual absl::StatusOr<LoadSample> Poll() = 0;
  // rdma-async: reads that found both slots torn and were retried (never returned).
  uint64_t torn_reads() const { return torn_reads_; }
  // Round trips made and bytes sent plus received, over the poller's life (for benchmarks).
  struct Traffic {
    uint64_t round_trips = 0;
    uint64_t bytes = 0;
  };
  virtual Traffic traffic() const = 0;

 protected:
  explicit Poller(PollerOptions options) : options_(std::move(options)) {}
  PollerOptions options_;
  uint64_t torn_reads_ = 0;
};

// The paper's WebSphere-style weighted load: each index in 0..1, weighted and summed.
struct LoadWeights {
  double cpu = 0.4;          // cpu_busy over the last interval
  double memory = 0.2;       // memory_used
  double network = 0.2;      // (rx + tx bytes/s) / network_capacity
  double connections = 0.2;  // connections / max_connections (the front end's own count)
  double network_capacity = 1.25e9;  // bytes per second (10 Gb/s)
  double max_connections = 1000;
};
double WeightedLoad(const Figures& figures, double connections, const LoadWeights& weights);

class Balancer {
 public:
  explicit Balancer(size_t backends, LoadWeights weights = {}, uint64_t seed = 1);
  size_t size() const { return backends_.size(); }
  // One more back end (a member that joined the cluster); returns its index.
  size_t Add() {
    backends_.emplace_back();
    return backends_.size() - 1;
  }
  // A new sample of back end i (figures are computed against its previous one).
  void Update(size_t i, const LoadSample& sample);
  // Marks back end i unreachable until its next Update: it is never picked.
  void MarkDown(size_t i);
  void SetConnections(size_t i, double connections);
  // The weighted load of back end i; nullopt while it has no sample or is down.
  std::optional<double> Load(size_t i) const;
  const Figures* figures(size_t i) const;
  // The back end with the least weighted load (ties: the lowest index). FAILED_PRECONDITION if
  // none has reported.
  absl::StatusOr<size_t> LeastLoaded() const;
  // Power of two choices: two distinct back ends at random (of those that reported), the less
  // loaded of them.
  absl::StatusOr<size_t> PowerOfTwo();

 private:
  struct Backend {
    std::optional<LoadSample> last;
    Figures figures;
    double connections = 0;
    bool up = false;
  };
  std::vector<Backend> backends_;
  LoadWeights weights_;
  std::mt19937_64 rng_;
};

}  // namespace ardma::monitor

#endif  // ARDMA_SERVICES_MONITOR_MONITOR_CLIENT_H_
