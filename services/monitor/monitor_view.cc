#include "services/monitor/monitor_view.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/net/listen_socket.h"
#include "core/net/socket_connect.h"
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
  return absl::StrCat("backend=\"", b.address, "\",scheme=\"", SchemeName(b.scheme), "\"");
}

}  // namespace

std::string TableText(std::span<const BackendState> backends, std::optional<size_t> pick) {
  std::string out = absl::StrFormat("%-2s%-22s %-12s %8s %7s %4s %4s %6s %6s %9s %9s %7s\n", "",
                                    "BACKEND", "SCHEME", "SEQ", "CPU", "RUN", "BLK", "LOAD1", "MEM",
                                    "NET RX/s", "NET TX/s", "POLL");
  for (size_t i = 0; i < backends.size(); ++i) {
    const BackendState& b = backends[i];
    std::string mark = pick == i ? "*" : "";
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
  std::string out;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    absl::StrAppend(&out, "# HELP ardma_monitor_", ToAbsl(name), " ", ToAbsl(help),
                    "\n# TYPE ardma_monitor_", ToAbsl(name), " ", ToAbsl(type), "\n");
  };
  family("up", "gauge", "1 if the last poll of the back end succeeded.");
  for (const BackendState& b : backends) {
    absl::StrAppend(&out, "ardma_monitor_up{", Labels(b), "} ", b.error.empty() && b.sample ? 1 : 0,
                    "\n");
  }
  family("poll_seconds", "gauge", "Round-trip time of the last poll.");
  for (const BackendState& b : backends) {
    absl::StrAppend(&out, "ardma_monitor_poll_seconds{", Labels(b), "} ",
                    absl::ToDoubleSeconds(b.latency), "\n");
  }
  family("sequence", "gauge", "Sequence number of the last sample.");
  for (const BackendState& b : backends) {
    if (b.sample) {
      absl::StrAppend(&out, "ardma_monitor_sequence{", Labels(b), "} ", b.sample->sequence, "\n");
    }
  }
  family("cpu_busy_ratio", "gauge", "Share of CPU time not idle, between the last two samples.");
  for (const BackendState& b : backends) {
    if (b.sample) {
      absl::StrAppend(&out, "ardma_monitor_cpu_busy_ratio{", Labels(b), "} ", b.figures.cpu_busy,
                      "\n");
    }
  }
  family("weighted_load", "gauge", "Weighted load (CPU, memory, network, connections), 0..1.");
  for (const BackendState& b : backends) {
    if (b.load)
      absl::StrAppend(&out, "ardma_monitor_weighted_load{", Labels(b), "} ", *b.load, "\n");
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
        absl::StrAppend(&out, "ardma_monitor_cpu_ticks_total{", Labels(b), ",cpu=\"", c,
                        "\",mode=\"", mode, "\"} ", value, "\n");
      }
    }
  }
  for (size_t i = 0; i < kNumFields; ++i) {
    const FieldInfo& info = Info(static_cast<Field>(i));
    std::string name = absl::StrCat(info.name, info.counter ? "_total" : "");
    family(name, info.counter ? "counter" : "gauge", info.help);
    for (const BackendState& b : backends) {
      if (b.sample) {
        absl::StrAppend(&out, "ardma_monitor_", name, "{", Labels(b), "} ", b.sample->fields[i],
                        "\n");
      }
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string_view listen, std::function<std::string()> render) {
  std::string address(listen);
  if (!address.empty() && address[0] == ':') address = absl::StrCat("0.0.0.0", address);
  ARDMA_ASSIGN_OR_RETURN(ListeningSocket socket, ListenSocket(address));
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(socket.fd, std::move(socket.address), std::move(render)));
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

MetricsServer::MetricsServer(int fd, std::string address, std::function<std::string()> render)
    : fd_(fd), address_(std::move(address)), render_(std::move(render)) {}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
}

void MetricsServer::Loop() {
  while (!stopping_.load()) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // Read the request head (a scraper sends a small GET), waiting at most a second.
    std::string request;
    char buf[2048];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 16384) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 1000) != 1) break;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      request.append(buf, static_cast<size_t>(n));
    }
    std::string response;
    if (request.rfind("GET ", 0) == 0) {
      std::string body = render_();
      response = absl::StrCat(
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
          "Content-Length: ",
          body.size(), "\r\nConnection: close\r\n\r\n", body);
    } else {
      response =
          "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    }
    (void)SendAll(fd, response);
    ::close(fd);
  }
}

}  // namespace ardma::monitor
