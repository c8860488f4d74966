// Prometheus text exposition (format 0.0.4) and a minimal HTTP server for scrapes: one writer and
// one server for every metrics endpoint of the project (ardmad --metrics, ardma-monitor
// --prometheus), so they read the same way.
//
//   PrometheusWriter w;
//   w.Family("ardma_requests_total", "counter", "Requests handled, by op.");
//   w.Sample("ardma_requests_total", PrometheusWriter::Label("op", "read"), 42);
//   std::string text = w.Take();
#ifndef ARDMA_CORE_METRICS_PROMETHEUS_H_
#define ARDMA_CORE_METRICS_PROMETHEUS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"

namespace ardma {

class PrometheusWriter {
 public:
  // "# HELP name help" and "# TYPE name type" (counter, gauge, histogram).
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // One sample; `labels` as Label() builds them, comma-separated, or empty.
  void Sample(std::string_view name, std::string_view labels, double value);
  void Sample(std::string_view name, std::string_view labels, uint64_t value);
  // A histogram's series: name_bucket{le=...} for each upper bound and +Inf (counts cumulative),
  // name_sum and name_count.
  void Histogram(std::string_view name, std::string_view labels, std::span<const double> bounds,
                 std::span<const uint64_t> cumulative, double sum, uint64_t count);
  // key="value", with \, " and newlines escaped as the format asks.
  static std::string Label(std::string_view key, std::string_view value);
  // "a_b_c" from "a.b-c": a metric name from one of the project's counter names.
  static std::string MetricName(std::string_view name);

  // The process_* families Prometheus' own clients export (CPU seconds, resident and virtual
  // memory, open and maximum descriptors, start time), read from /proc/self.
  void ProcessMetrics();
  // NAME_build_info{version=...,commit=...} 1, the convention for what is running.
  void BuildInfo(std::string_view prefix, std::string_view version, std::string_view commit);

  std::string Take() { return std::move(out_); }

 private:
  void Line(std::string_view name, std::string_view labels, std::string_view value);
  std::string out_;
};

// A minimal HTTP/1.1 server for scrapes: every GET gets `render()` as text/plain; version=0.0.4
// (GET / and /metrics alike), anything else 405. One thread; one request per connection.
// "[HOST]:PORT" (":9100" listens on every address).
class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(std::string_view listen,
                                                               std::function<std::string()> render);
  ~MetricsServer();
  const std::string& address() const { return address_; }
  void Stop();

 private:
  MetricsServer(int fd, std::string address, std::function<std::string()> render);
  void Loop();

  const int fd_;
  const std::string address_;
  std::function<std::string()> render_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_METRICS_PROMETHEUS_H_
