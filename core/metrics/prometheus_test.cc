#include "core/metrics/prometheus.h"

#include <cstdint>
#include <ctime>
#include <string>
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

TEST(PrometheusWriterTest, ValuesKeepEveryDigit) {
  PrometheusWriter w;
  w.Sample("a", "", 1795710000.25);
  w.Sample("b", "", 16777216.0);
  w.Sample("c", "", 0.1);
  EXPECT_EQ(w.Take(), "a 1795710000.25\nb 16777216\nc 0.1\n");
}

TEST(PrometheusWriterTest, ProcessMetricsAndBuildInfo) {
  PrometheusWriter w;
  w.ProcessMetrics();
  w.BuildInfo("ardma", "1.2.3", "abc");
  std::string text = w.Take();
  for (const char* family :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge", "process_open_fds gauge", "process_max_fds gauge",
        "process_start_time_seconds gauge", "ardma_build_info gauge"}) {
    EXPECT_THAT(text, ::testing::HasSubstr(std::string("# TYPE ") + family + "\n")) << text;
  }
  EXPECT_THAT(text, ::testing::HasSubstr("ardma_build_info{version=\"1.2.3\",commit=\"abc\"} 1\n"));
  // This process started within the last day, by the epoch clock.
  size_t at = text.find("\nprocess_start_time_seconds ");
  ASSERT_NE(at, std::string::npos);
  double started = std::stod(text.substr(at + 28));
  double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(started, now + 1);
  EXPECT_GT(started, now - 86400);
}

}  // namespace
}  // namespace ardma
