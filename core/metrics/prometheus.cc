#include "core/metrics/prometheus.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/net/listen_socket.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma {

void PrometheusWriter::Family(std::string_view name, std::string_view type,
                              std::string_view help) {
  absl::StrAppend(&out_, "# HELP ", ToAbsl(name), " ", ToAbsl(help), "\n# TYPE ", ToAbsl(name),
                  " ", ToAbsl(type), "\n");
}

void PrometheusWriter::Line(std::string_view name, std::string_view labels,
                            std::string_view value) {
  absl::StrAppend(&out_, ToAbsl(name));
  if (!labels.empty()) absl::StrAppend(&out_, "{", ToAbsl(labels), "}");
  absl::StrAppend(&out_, " ", ToAbsl(value), "\n");
}

void PrometheusWriter::Sample(std::string_view name, std::string_view labels, double value) {
  if (std::isinf(value)) return Line(name, labels, value > 0 ? "+Inf" : "-Inf");
  if (std::isnan(value)) return Line(name, labels, "NaN");
  // The shortest text that reads back as the same double: no precision lost (a start time in
  // seconds since the epoch needs ten digits, more than StrCat's six).
  char text[64];
  std::to_chars_result end = std::to_chars(text, text + sizeof text, value);
  Line(name, labels, std::string_view(text, static_cast<size_t>(end.ptr - text)));
}

void PrometheusWriter::Sample(std::string_view name, std::string_view labels, uint64_t value) {
  Line(name, labels, absl::StrCat(value));
}

void PrometheusWriter::Histogram(std::string_view name, std::string_view labels,
                                 std::span<const double> bounds,
                                 std::span<const uint64_t> cumulative, double sum,
                                 uint64_t count) {
  std::string bucket = absl::StrCat(ToAbsl(name), "_bucket");
  std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < bounds.size() && i < cumulative.size(); ++i) {
    Line(bucket, absl::StrCat(ToAbsl(labels), sep, Label("le", absl::StrCat(bounds[i]))),
         absl::StrCat(cumulative[i]));
  }
  Line(bucket, absl::StrCat(ToAbsl(labels), sep, Label("le", "+Inf")), absl::StrCat(count));
  Sample(absl::StrCat(ToAbsl(name), "_sum"), labels, sum);
  Sample(absl::StrCat(ToAbsl(name), "_count"), labels, count);
}

std::string PrometheusWriter::Label(std::string_view key, std::string_view value) {
  std::string out = absl::StrCat(ToAbsl(key), "=\"");
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string PrometheusWriter::MetricName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) c = '_';
  }
  return out;
}

void PrometheusWriter::ProcessMetrics() {
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces): state is field 3; utime 14, stime 15,
  // starttime 22, vsize 23, rss 24 (pages).
  std::vector<std::string> f;
  if (size_t paren = stat.rfind(')'); paren != std::string::npos) {
    std::istringstream rest(stat.substr(paren + 2));
    for (std::string field; rest >> field;) f.push_back(field);
  }
  auto field = [&](size_t n) { return f.size() > n - 3 ? std::stod(f[n - 3]) : 0.0; };
  double boot = 0;  // the system's boot time, seconds since the epoch
  std::ifstream proc_stat("/proc/stat");
  for (std::string line; std::getline(proc_stat, line);) {
    if (line.rfind("btime ", 0) == 0) boot = std::stod(line.substr(6));
  }
  std::error_code error;
  double open_fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++open_fds;
  }
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  struct Gauge {
    const char* name;
    const char* type;
    const char* help;
    double value;
  };
  const Gauge all[] = {
      {"process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.",
       (field(14) + field(15)) / ticks},
      {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
       field(24) * page},
      {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23)},
      {"process_open_fds", "gauge", "Open file descriptors.", open_fds},
      {"process_max_fds", "gauge", "The most file descriptors the process may open.",
       files.rlim_cur == RLIM_INFINITY ? 0.0 : static_cast<double>(files.rlim_cur)},
      {"process_start_time_seconds", "gauge",
       "When the process started, in seconds since the Unix epoch.", boot + field(22) / ticks},
  };
  for (const Gauge& g : all) {
    Family(g.name, g.type, g.help);
    Sample(g.name, "", g.value);
  }
}

void PrometheusWriter::BuildInfo(std::string_view prefix, std::string_view version,
                                 std::string_view commit) {
  std::string name = absl::StrCat(ToAbsl(prefix), "_build_info");
  Family(name, "gauge", "What is running: always 1, labelled with the version and commit.");
  Sample(name, absl::StrCat(Label("version", version), ",", Label("commit", commit)), 1.0);
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

}  // namespace ardma
