// What ardma-monitor shows: the state of each polled back end as a live table, as lines, and as
// Prometheus text exposition (served over HTTP by MetricsServer, so existing dashboards can
// scrape the samples).
#ifndef ARDMA_SERVICES_MONITOR_MONITOR_VIEW_H_
#define ARDMA_SERVICES_MONITOR_MONITOR_VIEW_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/metrics/prometheus.h"
#include "services/monitor/load_sample.h"
#include "services/monitor/monitor_client.h"

namespace ardma::monitor {

struct BackendState {
  std::string address;
  Scheme scheme = Scheme::kRdmaSync;
  std::optional<LoadSample> sample;  // the last good one
  Figures figures;                   // against the sample before it
  std::optional<double> load;        // weighted load (LoadWeights)
  absl::Duration latency;            // of the last poll
  std::string error;                 // of the last poll; empty if it succeeded
  uint64_t polls = 0, failures = 0;
  // A member of the watched cluster that left it: no longer polled nor picked.
  bool left = false;
};

// A table with one row per back end; `pick` (if any) is marked with '*'.
std::string TableText(std::span<const BackendState> backends, std::optional<size_t> pick);
// One line for a back end: "time address scheme seq=.. cpu=..% run=.. ..." or its error.
std::string LineText(const BackendState& backend);
// Prometheus text exposition format, version 0.0.4: metrics named ardma_monitor_*, labelled
// backend="host:port" and scheme.
std::string PrometheusText(std::span<const BackendState> backends);

// The scrape server is core/metrics/prometheus.h's.
using ::ardma::MetricsServer;

}  // namespace ardma::monitor

#endif  // ARDMA_SERVICES_MONITOR_MONITOR_VIEW_H_
