#include "core/metrics/prometheus.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

TEST(PrometheusWriterTest, FamiliesSamplesAndHistograms) {
  PrometheusWriter w;
  w.Family("ardma_requests_total", "counter", "Requests handled.");
  w.Sample("ardma_requests_total", PrometheusWriter::Label("op", "read"), uint64_t{7});
  w.Sample("ardma_up", "", 1.5);
  std::vector<double> bounds = {0.001, 0.01};
  std::vector<uint64_t> cumulative = {2, 3};
  w.Histogram("ardma_latency_seconds", PrometheusWriter::Label("op", "read"), bounds, cumulative,
              0.0125, 4);
  EXPECT_EQ(w.Take(),
            "# HELP ardma_requests_total Requests handled.\n"
            "# TYPE ardma_requests_total counter\n"
            "ardma_requests_total{op=\"read\"} 7\n"
            "ardma_up 1.5\n"
            "ardma_latency_seconds_bucket{op=\"read\",le=\"0.001\"} 2\n"
            "ardma_latency_seconds_bucket{op=\"read\",le=\"0.01\"} 3\n"
            "ardma_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"
            "ardma_latency_seconds_sum{op=\"read\"} 0.0125\n"
            "ardma_latency_seconds_count{op=\"read\"} 4\n");
}

TEST(PrometheusWriterTest, EscapesLabelsAndNamesMetrics) {
  EXPECT_EQ(PrometheusWriter::Label("path", "a\"b\\c\nd"), "path=\"a\\\"b\\\\c\\nd\"");
  EXPECT_EQ(PrometheusWriter::MetricName("heap.free.pages"), "heap_free_pages");
  EXPECT_EQ(PrometheusWriter::MetricName("a-b:c_d"), "a_b:c_d");
}

}  // namespace
}  // namespace ardma
