// ardmad: the Active RDMA server. Parses flags, starts a Server, waits for SIGINT/SIGTERM, stops.
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "core/cli/daemon_support.h"
#include "core/cli/flag_set.h"
#include "core/log.h"
#include "core/metrics/prometheus.h"
#include "core/security/auth.h"
#include "core/server/isolation.h"
#include "core/server/server.h"
#include "services/monitor/monitor_agent.h"

// The services ardmad comes with: their function names are reserved for their own code.
ARDMA_DECLARE_ACTIVE_LIBRARY(dht);
ARDMA_DECLARE_ACTIVE_LIBRARY(lock);
ARDMA_DECLARE_ACTIVE_LIBRARY(list);
ARDMA_DECLARE_ACTIVE_LIBRARY(dfs);
ARDMA_DECLARE_ACTIVE_LIBRARY(monitor);
ARDMA_DECLARE_ACTIVE_LIBRARY(cc);
ARDMA_DECLARE_ACTIVE_LIBRARY(grep);
ARDMA_DECLARE_ACTIVE_LIBRARY(find);

namespace {

constexpr char kUsage[] =
    "Usage: ardmad [flags]\n"
    "\n"
    "The Active RDMA server: exposes a byte-addressable memory region to clients, which either\n"
    "operate on it one-sidedly (READ, WRITE, CAS, FETCH_ADD) or ship code to it (LOAD) and run\n"
    "that code next to the data (EXECUTE). Stops cleanly on SIGINT or SIGTERM.";

int Main(int argc, char** argv) {
  ardma::ServerOptions options;
  int64_t io_threads = options.io_threads;
  int64_t workers = options.handler.workers;
  int64_t worker_queue = static_cast<int64_t>(options.handler.worker_queue);
  uint64_t memory = 0;
  uint64_t max_frame = options.handler.limits.max_payload_bytes;
  int64_t max_batch = options.handler.limits.max_batch_entries;
  int64_t max_inflight = options.handler.limits.max_inflight_per_connection;
  std::string port_file;
  int64_t dma_cost_ns = 0;
  std::string nic_cpu;
  ardma::monitor::AgentOptions monitor;
  monitor.interval = absl::ZeroDuration();
  bool quiet = false;
  std::string ucx = "auto";

  ardma::FlagSet flags("ardmad", kUsage);
  flags.ConfigFileFlag();  // --config /etc/ardma/ardmad.conf (the packaged service uses it)
  flags.String("listen", &options.listen, "HOST:PORT", "address to listen on; port 0 picks one");
  flags.String("unix-socket", &options.unix_socket, "PATH",
               "also listen on this Unix-domain socket (clients use --server unix:PATH)");
  flags.Bytes("memory", &memory,
              "heap size, e.g. 1G (default 1G; with an existing --memory-file, the file's size)");
  flags.String(
      "memory-file", &options.memory_file, "PATH",
      "back the heap with this file (e.g. /dev/shm/ardma.heap) so data survives a restart");
  flags.String("register-dir", &options.handler.registration.dir, "DIR",
               "clients may register files under DIR as regions (REGISTER; e.g. a directory on "
               "/dev/shm); default: none");
  int64_t register_max = static_cast<int64_t>(options.handler.registration.max_regions);
  flags.Int("register-max", &register_max, "N", "most regions registered at once (default 4096)");
  uint64_t register_max_bytes = options.handler.registration.max_bytes;
  flags.Bytes("register-max-bytes", &register_max_bytes,
              "most bytes registered at once, all regions together (default 64G)");
  flags.Int("io-threads", &io_threads, "N", "I/O threads (each runs one-sided ops inline)");
  flags.Int("workers", &workers, "N",
            "worker threads for long EXECUTEs and LOADs; 0 runs all inline");
  flags.Int("worker-queue", &worker_queue, "N", "EXECUTEs that may wait for a worker");
  flags.Int("dma-cost-ns", &dma_cost_ns, "NS",
            "model: each memory access by active code costs NS more (busy-wait), to sweep seed "
            "000's DMA-cost axis; 0 = off");
  flags.Duration("inline-threshold", &options.handler.inline_threshold,
                 "EXECUTEs whose average run time is below this run on the I/O thread");
  flags.Duration("default-deadline", &options.handler.default_deadline,
                 "deadline of an EXECUTE that names none");
  flags.Bytes("max-frame", &max_frame, "largest frame payload accepted");
  flags.Int("max-batch", &max_batch, "N", "most entries in one READ or WRITE");
  flags.Bytes("max-queued", &options.handler.limits.max_queued_bytes_per_connection,
              "answers queued for one connection before the server stops reading it (default "
              "64M)");
  flags.Bytes("max-queued-total", &options.handler.limits.max_queued_bytes_total,
              "answers queued over all connections before the server stops reading those with "
              "answers queued (default 256M)");
  absl::Duration frame_timeout = absl::Milliseconds(options.handler.limits.frame_timeout_ms);
  absl::Duration idle_timeout;
  flags.Duration("idle-timeout", &idle_timeout,
                 "close a connection that sends nothing for this long while none of its requests "
                 "is unanswered (default 0: never); announced to clients, which keep their "
                 "connections alive with a PING every third of it, so only a stopped or gone "
                 "client is closed, and the locks it holds pass on then");
  flags.Duration("frame-timeout", &frame_timeout,
                 "a frame begun must arrive whole within this, or the connection is closed "
                 "(default 30s; 0: no limit)");
  absl::Duration stop_grace = absl::Seconds(10);
  flags.Duration("stop-grace", &stop_grace,
                 "on SIGTERM/SIGINT, wait at most this for running code to finish, then exit 1 "
                 "anyway (default 10s; 0: wait for ever)");
  flags.Int("max-inflight", &max_inflight, "N",
            "unanswered requests per connection before reading pauses");
  flags.String("preload", &options.preload_dir, "DIR", "load every .so in DIR at start");
  options.built_in_services = {
      &ardma::active_libraries::dht(),     &ardma::active_libraries::lock(),
      &ardma::active_libraries::list(),    &ardma::active_libraries::dfs(),
      &ardma::active_libraries::monitor(), &ardma::active_libraries::cc(),
      &ardma::active_libraries::grep(),    &ardma::active_libraries::find()};
  int64_t max_libraries = static_cast<int64_t>(options.code_limits.max_libraries);
  flags.Int("max-libraries", &max_libraries, "N",
            "most libraries loaded at once; past it unused old versions are unloaded, then LOAD "
            "is refused (default 512)");
  flags.Bytes("max-code", &options.code_limits.max_bytes,
              "most bytes of code loaded at once, the same way (default 1G)");
  flags.String("nic-cpu", &nic_cpu, "LIST",
               "pin the I/O threads to these CPUs (e.g. 1 or 0,2-3), standing in for a NIC's own "
               "processor");
  std::string isolate = "untrusted";
  flags.String("isolate", &isolate, "none|untrusted|all",
               "run shipped functions (native and Java) in worker processes (one per --workers) "
               "over a shared mapping of the heap, so a crash or a runaway costs its request and "
               "a worker restart, not the server: for connections without the admin permission "
               "(untrusted, the default: only with --auth-file), for all, or for none; about "
               "30-120 us more per call (docs/BENCHMARKS.md); with workers one-sided atomics go "
               "through the server");
  flags.Bool("realtime", &options.realtime,
             "run the I/O threads under SCHED_FIFO (needs root or CAP_SYS_NICE)");
  flags.Duration("monitor-interval", &monitor.interval,
                 "publish a load sample of this host every interval (at least 1ms) in read-only "
                 "region 1, for load-monitor front ends (RDMA-Async); 0 = off");
  flags.String("monitor-procfs", &monitor.procfs, "PATH",
               "the procfs the load-monitor agent samples (e.g. a host's /proc mounted in a "
               "container)");
  std::string jvm_options;
  flags.String("jvm-lib", &options.jvm.libjvm, "PATH",
               "libjvm.so for Java active code (default: the JDK found at build time)");
  flags.String("jvm-options", &jvm_options, "OPTS",
               "options for the JVM, space-separated (e.g. \"-Xmx256m -Xss1m\"); the JVM starts "
               "on the first Java LOAD");
  flags.String("jvm-classpath", &options.jvm.classpath, "PATH",
               "more classes (directories or jars, ':'-separated) visible to all Java code");
  flags.String("ucx", &ucx, "auto|on|off",
               "the UCX transport for clients on ucx://HOST:PORT (one-sided READ/WRITE/CAS/"
               "FETCH_ADD, active messages for the rest); auto serves TCP alone if UCX cannot "
               "start, on fails instead");
  std::string sync = "interval";
  flags.String("sync", &sync, "none|interval|always",
               "when writes to a --memory-file reach the disk: when the kernel chooses (none), "
               "every --sync-interval (interval, the default), or before each write is answered "
               "(always); one-sided UCX writes are synced by the interval only");
  flags.Duration("sync-interval", &options.handler.sync_interval,
                 "how often --sync interval syncs (default 1s)");
  flags.String("port-file", &port_file, "PATH", "write the bound HOST:PORT here once listening");
  std::string auth_file;
  std::string unix_socket_mode = "0600";
  flags.String("auth-file", &auth_file, "FILE",
               "require clients to authenticate with a secret of FILE (lines NAME SECRET "
               "PERM[,PERM...]; PERM: read, write, exec, load, admin, all; mode 0600); "
               "docs/SECURITY.md");
  flags.Bool("format", &options.format,
             "format an existing --memory-file whose header is not a heap's (erasing it); without "
             "it ardmad refuses to start on such a file");
  flags.Bool("insecure", &options.insecure,
             "allow listening on a non-loopback address without --auth-file (anyone who reaches "
             "it may run code as this server's user)");
  flags.String("tls-cert", &options.tls_cert, "FILE",
               "serve TCP clients over TLS with this certificate chain (PEM); clients connect to "
               "tls://HOST:PORT");
  flags.String("tls-key", &options.tls_key, "FILE", "the private key of --tls-cert (PEM)");
  flags.String("tls-ca", &options.tls_ca, "FILE",
               "require client certificates signed by these CAs (mutual TLS); a certificate's "
               "common name authenticates as that --auth-file name");
  flags.String("unix-socket-mode", &unix_socket_mode, "MODE",
               "permissions of the --unix-socket file, octal; 0600 lets only this user connect");
  flags.Bool("quiet", &quiet, "log warnings and errors only");
  std::string metrics_listen;
  flags.String("metrics", &metrics_listen, "HOST:PORT",
               "serve Prometheus metrics (request counts and latency histograms by op, bytes, "
               "connections, parked requests, queue depth, heap, libraries) at "
               "http://HOST:PORT/metrics; unauthenticated, so loopback only unless --insecure");

  std::vector<std::string> positional;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &positional)) {
    return *exit_code;
  }
  if (!positional.empty()) {
    std::cerr << "ardmad: unexpected argument '" << positional[0] << "' (see --help)\n";
    return 2;
  }
  if (io_threads < 1 || io_threads > 256 || workers < 0 || workers > 1024 || worker_queue < 1 ||
      max_batch < 1 || max_inflight < 1 || max_frame < 64 || max_frame > (1ull << 31) ||
      dma_cost_ns < 0 || dma_cost_ns > 1000000000) {
    std::cerr << "ardmad: a thread count, queue or limit is out of range (see --help)\n";
    return 2;
  }
  if (ucx == "auto") {
    options.ucx = ardma::ServerOptions::Ucx::kAuto;
  } else if (ucx == "on") {
    options.ucx = ardma::ServerOptions::Ucx::kOn;
  } else if (ucx == "off") {
    options.ucx = ardma::ServerOptions::Ucx::kOff;
  } else {
    std::cerr << "ardmad: --ucx must be auto, on or off, not '" << ucx << "'\n";
    return 2;
  }
  if (max_libraries < 1) {
    std::cerr << "ardmad: --max-libraries must be at least 1\n";
    return 2;
  }
  options.code_limits.max_libraries = static_cast<size_t>(max_libraries);
  if (isolate == "none") {
    options.isolate = ardma::ServerOptions::Isolation::kNone;
  } else if (isolate == "untrusted") {
    options.isolate = ardma::ServerOptions::Isolation::kUntrusted;
  } else if (isolate == "all") {
    options.isolate = ardma::ServerOptions::Isolation::kAll;
  } else {
    std::cerr << "ardmad: --isolate must be none, untrusted or all, not '" << isolate << "'\n";
    return 2;
  }
  if (absl::StatusOr<ardma::SyncPolicy> policy = ardma::ParseSyncPolicy(sync); policy.ok()) {
    options.handler.sync = *policy;
  } else {
    std::cerr << "ardmad: " << policy.status().message() << "\n";
    return 2;
  }
  if (options.handler.sync_interval <= absl::ZeroDuration()) {
    std::cerr << "ardmad: --sync-interval must be positive\n";
    return 2;
  }
  for (absl::string_view part : absl::StrSplit(nic_cpu, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo, hi;
    if (!absl::SimpleAtoi(range[0], &lo) || !absl::SimpleAtoi(range.back(), &hi) || lo < 0 ||
        hi < lo || hi > 4095) {
      std::cerr << "ardmad: --nic-cpu: '" << part << "' is not a CPU or a range like 2-3\n";
      return 2;
    }
    for (int c = lo; c <= hi; ++c) options.io_cpus.push_back(c);
  }
  options.jvm.options = absl::StrSplit(jvm_options, ' ', absl::SkipEmpty());
  if (quiet) ardma::SetMinLogLevel(ardma::LogLevel::kWarning);
  // Abseil's lock-order graph costs a lookup on every Mutex::Lock; the tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  options.io_threads = static_cast<int>(io_threads);
  options.handler.workers = static_cast<int>(workers);
  options.handler.worker_queue = static_cast<size_t>(worker_queue);
  if (frame_timeout < absl::ZeroDuration() || frame_timeout > absl::Hours(24)) {
    std::cerr << "ardmad: --frame-timeout must be 0 to 24h\n";
    return 2;
  }
  options.handler.limits.frame_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(frame_timeout));
  if (idle_timeout < absl::ZeroDuration() || idle_timeout > absl::Hours(24 * 30)) {
    std::cerr << "ardmad: --idle-timeout must be 0 to 720h\n";
    return 2;
  }
  options.handler.limits.idle_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(idle_timeout));
  if (register_max < 0) {
    std::cerr << "ardmad: --register-max must be 0 or more\n";
    return 2;
  }
  options.handler.registration.max_regions = static_cast<size_t>(register_max);
  options.handler.registration.max_bytes = register_max_bytes;
  if (!options.handler.registration.dir.empty() &&
      !std::filesystem::is_directory(options.handler.registration.dir)) {
    std::cerr << "ardmad: --register-dir " << options.handler.registration.dir
              << " is not a directory\n";
    return 2;
  }
  options.handler.access_cost = absl::Nanoseconds(dma_cost_ns);
  options.handler.limits.max_payload_bytes = static_cast<uint32_t>(max_frame);
  options.handler.limits.max_batch_entries = static_cast<uint32_t>(max_batch);
  options.handler.limits.max_inflight_per_connection = static_cast<uint32_t>(max_inflight);
  options.memory_size = memory != 0 ? memory : (options.memory_file.empty() ? 1ull << 30 : 0);
  {
    char* end = nullptr;
    unsigned long mode = std::strtoul(unix_socket_mode.c_str(), &end, 8);
    if (unix_socket_mode.empty() || *end != '\0' || mode > 0777) {
      std::cerr << "ardmad: --unix-socket-mode: '" << unix_socket_mode
                << "' is not an octal mode like 0600 or 0660\n";
      return 2;
    }
    options.unix_socket_mode = static_cast<uint32_t>(mode);
  }
  if (!auth_file.empty()) {
    absl::StatusOr<ardma::security::AuthTable> table =
        ardma::security::AuthTable::LoadFile(auth_file);
    if (!table.ok()) {
      std::cerr << "ardmad: --auth-file: " << table.status().message() << "\n";
      return 2;
    }
    ARDMA_LOG(kInfo, "clients must authenticate: %u secrets in %s", table->size(), auth_file);
    options.handler.auth = std::make_shared<const ardma::security::AuthTable>(*std::move(table));
  }

  std::unique_ptr<ardma::monitor::MonitorAgent> agent;
  if (monitor.interval != absl::ZeroDuration()) {
    absl::StatusOr<std::unique_ptr<ardma::monitor::MonitorAgent>> created =
        ardma::monitor::MonitorAgent::Create(monitor);
    if (!created.ok()) {
      std::cerr << "ardmad: --monitor-interval: " << created.status().message() << "\n";
      return 2;
    }
    agent = *std::move(created);
    options.extra_regions.push_back(agent->region());
  }

  // Block the stop signals in every thread; the main thread waits for them.
  ardma::StopSignals stop_signals;

  absl::StatusOr<std::unique_ptr<ardma::Server>> server = ardma::Server::Start(options);
  if (!server.ok()) {
    std::cerr << "ardmad: " << server.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<ardma::MetricsServer> metrics;
  if (!metrics_listen.empty()) {
    std::string host = metrics_listen.substr(0, metrics_listen.rfind(':'));
    bool loopback =
        host.rfind("127.", 0) == 0 || host == "[::1]" || host == "::1" || host == "localhost";
    if (!loopback && !options.insecure) {
      std::cerr << "ardmad: --metrics " << metrics_listen
                << ": the metrics endpoint has no authentication; listen on 127.0.0.1 or pass "
                   "--insecure\n";
      return 2;
    }
    ardma::Server* s = server->get();
    absl::StatusOr<std::unique_ptr<ardma::MetricsServer>> started =
        ardma::MetricsServer::Start(metrics_listen, [s] { return s->handler().MetricsText(); });
    if (!started.ok()) {
      std::cerr << "ardmad: --metrics: " << started.status().message() << "\n";
      return 1;
    }
    metrics = *std::move(started);
    ARDMA_LOG(kInfo, "metrics at http://%s/metrics", metrics->address());
  }
  ardma::WritePortFile(port_file, (*server)->address());
  if (agent) agent->Start();
  int signal = stop_signals.Wait();
  ARDMA_LOG(kInfo, "received %s, stopping", signal == SIGINT ? "SIGINT" : "SIGTERM");
  // A function that never returns (a loop in shipped code) must not keep the server from
  // stopping: past the grace period the process ends without waiting for it. Memory-file data is
  // in the page cache already, so nothing acknowledged is lost.
  if (stop_grace > absl::ZeroDuration())
    std::thread([stop_grace] {
      absl::SleepFor(stop_grace);
      ARDMA_LOG(kError, "still running code %s after the stop signal: exiting without it",
                absl::FormatDuration(stop_grace));
      std::_Exit(1);
    }).detach();
  if (agent) agent->Stop();
  if (metrics) metrics->Stop();
  (*server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ardma::RunIsolatedWorkerIfAsked();  // returns unless started as an --isolate worker
  // Requests and replies of up to a few MiB come and go all the time: keep such buffers in the
  // heap, reused, instead of mapping and faulting in fresh pages for each (a DFS read of 1 MiB
  // spent more time in page faults than in copying).
  ::mallopt(M_MMAP_THRESHOLD, 16 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  return Main(argc, argv);
}
