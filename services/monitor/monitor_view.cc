#include "services/monitor/monitor_view.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/metrics/prometheus.h"
#include "core/status_macros.h"

namespace ardma::monitor {
namespace {

std::string Percent(double x) { return absl::StrFormat("%5.1f%%", 100 * x); }

std::string Bytes(double x) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f%s", x, units[u]);
}

std::string Labels(const BackendState& b) {
  return absl::StrCat(PrometheusWriter::Label("backend", b.address), ",",
                      PrometheusWriter::Label("scheme", SchemeName(b.scheme)));
}

}  // namespace

std::string TableText(std::span<const BackendState> backends, std::optional<size_t> pick) {
  std::string out = absl::StrFormat("%-2s%-22s %-12s %8s %7s %4s %4s %6s %6s %9s %9s %7s\n", "",
                                    "BACKEND", "SCHEME", "SEQ", "CPU", "RUN", "BLK", "LOAD1", "MEM",
                                    "NET RX/s", "NET TX/s", "POLL");
  for (size_t i = 0; i < backends.size(); ++i) {
    const BackendState& b = backends[i];
    std::string mark = pick == i ? "*" : "";
    if (b.left) {
      absl::StrAppendFormat(&out, "%-2s%-22s %-12s %s\n", mark, b.address, SchemeName(b.scheme),
                            "(left the cluster)");
      continue;
    }
    if (!b.sample) {
      absl::StrAppendFormat(&out, "%-2s%-22s %-12s %s\n", mark, b.address, SchemeName(b.scheme),
                            b.error.empty() ? "(no sample yet)" : b.error);
      continue;
    }
    const Figures& f = b.figures;
    absl::StrAppendFormat(&out, "%-2s%-22s %-12s %8d %7s %4d %4d %6.2f %6s %9s %9s %6.0fus%s\n",
                          mark, b.address, SchemeName(b.scheme), b.sample->sequence,
                          Percent(f.cpu_busy), f.procs_running, f.procs_blocked, f.load1,
                          Percent(f.memory_used), Bytes(f.net_rx_bytes_per_s),
                          Bytes(f.net_tx_bytes_per_s), absl::ToDoubleMicroseconds(b.latency),
                          b.error.empty() ? "" : absl::StrCat("  (last poll: ", b.error, ")"));
  }
  return out;
}

std::string LineText(const BackendState& b) {
  std::string when = absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
  if (b.left) {
    return absl::StrCat(when, " ", b.address, " ", SchemeName(b.scheme), " left the cluster");
  }
  if (!b.error.empty() || !b.sample) {
    return absl::StrCat(when, " ", b.address, " ", SchemeName(b.scheme),
                        " error: ", b.error.empty() ? "no sample yet" : b.error);
  }
  const Figures& f = b.figures;
  std::string per_cpu;
  for (double c : f.cpu_busy_per_cpu)
    absl::StrAppend(&per_cpu, per_cpu.empty() ? "" : ",", absl::StrFormat("%.0f", 100 * c));
  return absl::StrFormat(
      "%s %s %s seq=%d cpu=%.1f%% cpus=%s run=%d blocked=%d load1=%.2f mem=%.1f%% "
      "rx=%.0fB/s tx=%.0fB/s intr=%d softirq=%d load=%.3f poll=%.0fus",
      when, b.address, SchemeName(b.scheme), b.sample->sequence, 100 * f.cpu_busy, per_cpu,
      f.procs_running, f.procs_blocked, f.load1, 100 * f.memory_used, f.net_rx_bytes_per_s,
      f.net_tx_bytes_per_s, f.interrupts, f.softirqs, b.load.value_or(0),
      absl::ToDoubleMicroseconds(b.latency));
}

std::string PrometheusText(std::span<const BackendState> backends) {
  PrometheusWriter w;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    w.Family(absl::StrCat("ardma_monitor_", ToAbsl(name)), type, help);
  };
  auto sample = [&](std::string_view name, const BackendState& b, auto value,
                    const std::string& extra = "") {
    w.Sample(absl::StrCat("ardma_monitor_", ToAbsl(name)), Labels(b) + extra, value);
  };
  family("up", "gauge", "1 if the last poll of the back end succeeded.");
  for (const BackendState& b : backends) {
    sample("up", b, uint64_t{!b.left && b.error.empty() && b.sample ? 1u : 0u});
  }
  family("poll_seconds", "gauge", "Round-trip time of the last poll.");
  for (const BackendState& b : backends) sample("poll_seconds", b, absl::ToDoubleSeconds(b.latency));
  family("sequence", "gauge", "Sequence number of the last sample.");
  for (const BackendState& b : backends) {
    if (b.sample) sample("sequence", b, uint64_t{b.sample->sequence});
  }
  family("cpu_busy_ratio", "gauge", "Share of CPU time not idle, between the last two samples.");
  for (const BackendState& b : backends) {
    if (b.sample) sample("cpu_busy_ratio", b, double{b.figures.cpu_busy});
  }
  family("weighted_load", "gauge", "Weighted load (CPU, memory, network, connections), 0..1.");
  for (const BackendState& b : backends) {
    if (b.load) sample("weighted_load", b, double{*b.load});
  }
  family("cpu_ticks_total", "counter", "CPU time by CPU and mode, in ticks (USER_HZ).");
  for (const BackendState& b : backends) {
    if (!b.sample) continue;
    for (size_t c = 0; c < b.sample->cpus.size(); ++c) {
      const CpuTimes& t = b.sample->cpus[c];
      std::pair<const char*, uint64_t> modes[] = {
          {"user", t.user},     {"nice", t.nice}, {"system", t.system},   {"idle", t.idle},
          {"iowait", t.iowait}, {"irq", t.irq},   {"softirq", t.softirq}, {"steal", t.steal}};
      for (auto [mode, value] : modes) {
        sample("cpu_ticks_total", b, uint64_t{value},
               absl::StrCat(",", PrometheusWriter::Label("cpu", absl::StrCat(c)), ",",
                            PrometheusWriter::Label("mode", mode)));
      }
    }
  }
  for (size_t i = 0; i < kNumFields; ++i) {
    const FieldInfo& info = Info(static_cast<Field>(i));
    std::string name = absl::StrCat(info.name, info.counter ? "_total" : "");
    family(name, info.counter ? "counter" : "gauge", info.help);
    for (const BackendState& b : backends) {
      if (b.sample) sample(name, b, uint64_t{b.sample->fields[i]});
    }
  }
  return w.Take();
}

}  // namespace ardma::monitor
