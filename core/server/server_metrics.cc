// RequestHandler::Stats and StatsSummary (STATS) and MetricsText: the server's counters and
// gauges, and its latency histograms, in Prometheus text format (ardmad --metrics;
// core/metrics/prometheus.h).
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/active/local_context.h"
#include "core/memory/heap.h"
#include "core/metrics/prometheus.h"
#include "core/server/request_handler.h"
#include "core/version.h"

namespace ardma {
namespace {

// One STATS entry as Prometheus names and types it: levels are gauges, the rest counters ending
// in _total; nanoseconds become seconds, a percentage a ratio, byte levels end in _bytes.
struct Metric {
  std::string name;
  const char* type;
  double value;
};
Metric ForPrometheus(const std::string& stat, uint64_t raw) {
  static const absl::flat_hash_set<std::string> kLevels = {
      "connections.open", "connections.queued_bytes", "parked.now",    "code.libraries",
      "code.bytes",       "workers.queued",           "dedup.entries", "owners.live",
      "owners.slots",     "regions.registered",       "regions.bytes"};
  static const absl::flat_hash_set<std::string> kByteLevels = {
      "heap.size",       "heap.allocated",        "heap.free",
      "heap.free.pages", "heap.free.slab_blocks", "heap.largest_free_run",
      "heap.orphaned"};
  const bool gauge = kLevels.contains(stat) || absl::StartsWith(stat, "heap.");
  std::string name = absl::StrCat("ardma_", PrometheusWriter::MetricName(stat));
  double value = static_cast<double>(raw);
  if (absl::EndsWith(name, "_ns")) {
    name = absl::StrCat(name.substr(0, name.size() - 3), "_seconds");
    value *= 1e-9;
  } else if (absl::EndsWith(name, "_pct")) {
    name = absl::StrCat(name.substr(0, name.size() - 4), "_ratio");
    value /= 100;
  } else if (kByteLevels.contains(stat)) {
    absl::StrAppend(&name, "_bytes");
  } else if (stat == "regions.registered") {
    absl::StrAppend(&name, "_now");  // beside ardma_regions_registered_total, the count so far
  }
  if (!gauge && !absl::EndsWith(name, "_total")) absl::StrAppend(&name, "_total");
  return {name, gauge ? "gauge" : "counter", value};
}

}  // namespace

std::string RequestHandler::MetricsText() const {
  PrometheusWriter w;
  w.Family("ardma_requests_total", "counter", "Requests received, by op.");
  for (int op = 1; op < wire::kNumOps; ++op) {
    w.Sample("ardma_requests_total",
             PrometheusWriter::Label(
                 "op", absl::AsciiStrToLower(wire::OpName(static_cast<wire::Op>(op)))),
             counters_.Requests(static_cast<uint8_t>(op)));
  }
  w.Family("ardma_request_duration_seconds", "histogram",
           "Time from a request's arrival to its answer, by op (one-sided UCX operations never "
           "reach the server).");
  for (int op = 1; op < wire::kNumOps; ++op) {
    const LatencyTotals h = counters_.Latencies(static_cast<uint8_t>(op));
    uint64_t count = h.count;
    if (count == 0) continue;
    std::array<uint64_t, kLatencyBounds.size()> cumulative = h.Cumulative();
    w.Histogram("ardma_request_duration_seconds",
                PrometheusWriter::Label(
                    "op", absl::AsciiStrToLower(wire::OpName(static_cast<wire::Op>(op)))),
                kLatencyBounds, cumulative,
                static_cast<double>(h.sum_ns) * 1e-9, count);
  }
  for (const auto& [name, value] : Stats()) {
    if (absl::StartsWith(name, "requests.")) continue;  // ardma_requests_total above
    Metric m = ForPrometheus(name, value);
    w.Family(m.name, m.type, absl::StrCat("STATS ", name, "."));
    w.Sample(m.name, "", m.value);
  }
  w.BuildInfo("ardma", ProjectVersion(), BuildCommit());
  w.ProcessMetrics();
  return w.Take();
}

std::vector<wire::StatsEntry> RequestHandler::StatsSummary() const {
  std::vector<wire::StatsEntry> out;
  out.emplace_back("connections.open", counters_.Get(Stat::kConnectionsOpen));
  out.emplace_back("code.libraries", registry_->size());
  if (absl::StatusOr<RegionRef> heap = regions_->Get(kHeapRegion); heap.ok()) {
    out.emplace_back("heap.size", (*heap)->size());
  }
  return out;
}

std::vector<wire::StatsEntry> RequestHandler::Stats() const {
  std::vector<wire::StatsEntry> out = counters_.Snapshot();
  out.emplace_back("parked.now", parking_.size());
  out.emplace_back("code.libraries", registry_->size());
  out.emplace_back("code.bytes", registry_->bytes());
  out.emplace_back("code.unloaded", registry_->unloaded());
  out.emplace_back("workers.queued", workers_ != nullptr ? workers_->queued() : 0);
  out.emplace_back("dedup.entries", dedup_.size());
  out.emplace_back("dedup.replays", dedup_.replays());
  if (isolated_ != nullptr) {
    out.emplace_back("isolated.runs", isolated_->runs());
    out.emplace_back("isolated.restarts", isolated_->restarts());    // crashed or killed workers
    out.emplace_back("isolated.forbidden", isolated_->forbidden());  // forbidden system calls
    out.emplace_back("isolated.retired", isolated_->retired());      // used half their CPU limit
    // Calls whose worker an I/O (or UCX progress) thread called itself, and those of them whose
    // wait it handed to the pool because they outlasted an inline run.
    out.emplace_back("isolated.inline", isolated_->inline_runs());
    out.emplace_back("isolated.handed_off", isolated_->handed_off());
  }
  if (owners_ != nullptr) {
    out.emplace_back("owners.live", owners_->live());  // the server itself and each connection
    out.emplace_back("owners.slots", owners_->slots());
  }
  registrar_.AppendStats(&out);
  if (absl::StatusOr<RegionRef> heap = regions_->Get(kHeapRegion); heap.ok()) {
    out.emplace_back("heap.size", (*heap)->size());
    // A walk of the heap's metadata (local: a scan of its descriptors, about 1 ms per GiB).
    Execution ex;
    ex.regions = regions_;
    LocalContext ctx(&ex);
    absl::StatusOr<heap::HeapReport> r = heap::Check(ctx);
    out.emplace_back("heap.allocated", r.ok() ? r->live_bytes() : 0);
    if (r.ok()) {
      out.emplace_back("heap.free", r->free_bytes());
      out.emplace_back("heap.free.pages", r->free_page_bytes);
      out.emplace_back("heap.free.slab_blocks", r->slab_free_bytes);
      out.emplace_back("heap.largest_free_run", r->largest_free_run);
      out.emplace_back("heap.fragmentation_pct",
                       static_cast<uint64_t>(r->fragmentation() * 100.0 + 0.5));
      out.emplace_back("heap.orphaned", r->orphaned_bytes);
      out.emplace_back("heap.errors", r->errors.size());
    }
  }
  return out;
}

}  // namespace ardma
