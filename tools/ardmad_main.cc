// ardmad: the Active RDMA server. Parses flags, starts a Server, waits for SIGINT/SIGTERM, stops.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "core/cli/daemon_support.h"
#include "core/cli/flag_set.h"
#include "core/cluster/fence.h"
#include "core/cluster/member.h"
#include "core/cluster/peer_calls.h"
#include "core/host_port.h"
#include "core/log.h"
#include "core/metrics/prometheus.h"
#include "core/security/auth.h"
#include "core/server/isolation.h"
#include "core/memory/heap.h"
#include "core/server/server.h"
#include "core/slots.h"
#include "core/server/slot_replication.h"
#include "core/status_macros.h"
#include "services/monitor/monitor_agent.h"
#include "tools/ardmad_failover.h"

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

// What ardmad runs with: the server's options, and the flags' raw values that Apply turns into
// them (checked there).
struct Config {
  ardma::ServerOptions options;
  ardma::monitor::AgentOptions monitor{.interval = absl::ZeroDuration()};
  std::string port_file;
  std::string metrics_listen;
  absl::Duration stop_grace = absl::Seconds(10);
  bool quiet = false;
  std::string cluster;  // --cluster etcd://HOST:PORT[,...]/NAME: join that cluster
  absl::Duration cluster_ttl = absl::Seconds(5);
  std::string advertise;  // --advertise HOST: the host registered for clients to reach

  // Raw flag values.
  int64_t io_threads = options.io_threads;
  int64_t workers = options.handler.workers;
  int64_t worker_queue = static_cast<int64_t>(options.handler.worker_queue);
  uint64_t memory = 0;
  uint64_t max_frame = options.handler.limits.max_payload_bytes;
  int64_t max_batch = options.handler.limits.max_batch_entries;
  int64_t max_inflight = options.handler.limits.max_inflight_per_connection;
  int64_t dma_cost_ns = 0;
  std::string nic_cpu;
  std::string ucx = "auto";
  int64_t register_max = static_cast<int64_t>(options.handler.registration.max_regions);
  uint64_t register_max_bytes = options.handler.registration.max_bytes;
  absl::Duration frame_timeout = absl::Milliseconds(options.handler.limits.frame_timeout_ms);
  absl::Duration idle_timeout;
  int64_t max_libraries = static_cast<int64_t>(options.code_limits.max_libraries);
  std::string isolate = "untrusted";
  std::string isolate_user;
  int64_t isolate_cpu = 3600;
  std::string jvm_options;
  std::string sync = "interval";
  std::string auth_file;
  std::string unix_socket_mode = "0600";
};

// Where clients connect.
void DeclareListeningFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("listen", &c.options.listen, "HOST:PORT", "address to listen on; port 0 picks one");
  flags.String("unix-socket", &c.options.unix_socket, "PATH",
               "also listen on this Unix-domain socket (clients use --server unix:PATH)");
}

// The heap and the regions clients register.
void DeclareStorageFlags(ardma::FlagSet& flags, Config& c) {
  flags.Bytes("memory", &c.memory,
              "heap size, e.g. 1G (default 1G; with an existing --memory-file, the file's size)");
  flags.String(
      "memory-file", &c.options.memory_file, "PATH",
      "back the heap with this file (e.g. /dev/shm/ardma.heap) so data survives a restart");
  flags.String("register-dir", &c.options.handler.registration.dir, "DIR",
               "clients may register files under DIR as regions (REGISTER; e.g. a directory on "
               "/dev/shm); default: none");
  flags.Int("register-max", &c.register_max, "N", "most regions registered at once (default 4096)");
  flags.Bytes("register-max-bytes", &c.register_max_bytes,
              "most bytes registered at once, all regions together (default 64G)");
  flags.Duration("register-quarantine", &c.options.handler.registration.quarantine,
                 "a deregistered region stays mapped, unreachable, this long (default 5s), so a "
                 "one-sided write already sent cannot land in memory mapped after it; it counts "
                 "against --register-max and --register-max-bytes until then");
}

// Threads and the DMA-cost model.
void DeclareThreadsFlags(ardma::FlagSet& flags, Config& c) {
  flags.Int("io-threads", &c.io_threads, "N",
            "I/O threads, and UCX progress threads (each runs one-sided ops inline)");
  flags.Int("workers", &c.workers, "N",
            "worker threads for long EXECUTEs and LOADs; 0 runs all inline");
  flags.Int("worker-queue", &c.worker_queue, "N", "EXECUTEs that may wait for a worker");
  flags.Int("dma-cost-ns", &c.dma_cost_ns, "NS",
            "model: each memory access by active code costs NS more (busy-wait), to sweep the "
            "Active RDMA paper's DMA-cost axis; 0 = off");
}

// Deadlines, frame and connection limits, and stopping.
void DeclareLimitsFlags(ardma::FlagSet& flags, Config& c) {
  flags.Duration("inline-threshold", &c.options.handler.inline_threshold,
                 "EXECUTEs whose average run time is below this run on the I/O thread");
  flags.Duration("default-deadline", &c.options.handler.default_deadline,
                 "deadline of an EXECUTE that names none");
  flags.Bytes("max-frame", &c.max_frame, "largest frame payload accepted");
  flags.Int("max-batch", &c.max_batch, "N", "most entries in one READ or WRITE");
  flags.Bytes("max-queued", &c.options.handler.limits.max_queued_bytes_per_connection,
              "answers queued for one connection before the server stops reading it (default "
              "64M)");
  flags.Bytes("max-queued-total", &c.options.handler.limits.max_queued_bytes_total,
              "answers queued over all connections before the server stops reading those with "
              "answers queued (default 256M)");
  flags.Duration("idle-timeout", &c.idle_timeout,
                 "close a connection that sends nothing for this long while none of its requests "
                 "is unanswered (default 0: never); announced to clients, which keep their "
                 "connections alive with a PING every third of it, so only a stopped or gone "
                 "client is closed, and the locks it holds pass on then");
  flags.Duration("frame-timeout", &c.frame_timeout,
                 "a frame begun must arrive whole within this, or the connection is closed "
                 "(default 30s; 0: no limit)");
  flags.Duration("stop-grace", &c.stop_grace,
                 "on SIGTERM/SIGINT, wait at most this for running code to finish, then exit 1 "
                 "anyway (default 10s; 0: wait for ever)");
  flags.Int("max-inflight", &c.max_inflight, "N",
            "unanswered requests per connection before reading pauses");
}

// Shipped code: preloads and limits.
void DeclareCodeFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("preload", &c.options.preload_dir, "DIR", "load every .so in DIR at start");
  flags.Int("max-libraries", &c.max_libraries, "N",
            "most libraries loaded at once; past it unused old versions are unloaded, then LOAD "
            "is refused (default 512)");
  flags.Bytes("max-code", &c.options.code_limits.max_bytes,
              "most bytes of code loaded at once, the same way (default 1G)");
}

// CPU placement, isolation of shipped code, and the load-monitor agent.
void DeclarePlacementFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("nic-cpu", &c.nic_cpu, "LIST",
               "pin the I/O threads to these CPUs (e.g. 1 or 0,2-3), standing in for a NIC's own "
               "processor");
  flags.String("isolate", &c.isolate, "none|untrusted|all",
               "run shipped functions (native and Java) in worker processes (one per --workers) "
               "over a shared mapping of the heap, so a crash or a runaway costs its request and "
               "a worker restart, not the server: for connections without the admin permission "
               "(untrusted, the default: only with --auth-file), for all, or for none; workers "
               "(and trial loads of new native code) run in a sandbox: another user, no files, "
               "no sockets, no programs, a system-call allow-list (docs/SECURITY.md); about "
               "7-10 us more per call on a 2-vCPU VM (docs/BENCHMARKS.md); with workers "
               "one-sided atomics go through the server");
  flags.String("isolate-user", &c.isolate_user, "USER",
               "the user isolated workers run as (needs ardmad to run as root; default: nobody "
               "when root, else ardmad's own user)");
  flags.Int("isolate-cpu", &c.isolate_cpu, "SECONDS",
            "CPU time an isolated worker may use (RLIMIT_CPU); it is replaced after an answer "
            "once it has used half, and a call that uses the rest is RESOURCE_EXHAUSTED");
  flags.Duration("isolate-spin", &c.options.isolate_spin,
                 "how long the server and an isolated worker spin for each other's turn before "
                 "they sleep: for machines with a core to spare per worker (0 = sleep at once, "
                 "and run a worker on its caller's CPU)");
  flags.Bool("realtime", &c.options.realtime,
             "run the I/O threads under SCHED_FIFO (needs root or CAP_SYS_NICE)");
  flags.Duration("monitor-interval", &c.monitor.interval,
                 "publish a load sample of this host every interval (at least 1ms) in read-only "
                 "region 1, for load-monitor front ends (RDMA-Async); 0 = off");
  flags.String("monitor-procfs", &c.monitor.procfs, "PATH",
               "the procfs the load-monitor agent samples (e.g. a host's /proc mounted in a "
               "container)");
}

// Java active code, and the UCX transport.
void DeclareJvmFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("jvm-lib", &c.options.jvm.libjvm, "PATH",
               "libjvm.so for Java active code (default: the JDK found at build time)");
  flags.String("jvm-options", &c.jvm_options, "OPTS",
               "options for the JVM, space-separated (e.g. \"-Xmx256m -Xss1m\"); the JVM starts "
               "on the first Java LOAD");
  flags.String("jvm-classpath", &c.options.jvm.classpath, "PATH",
               "more classes (directories or jars, ':'-separated) visible to all Java code");
  flags.String("ucx", &c.ucx, "auto|on|off",
               "the UCX transport for clients on ucx://HOST:PORT (one-sided READ/WRITE/CAS/"
               "FETCH_ADD, active messages for the rest); auto serves TCP alone if UCX cannot "
               "start, on fails instead");
}

// Durability of a --memory-file.
void DeclareSyncFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("sync", &c.sync, "none|interval|always",
               "when writes to a --memory-file reach the disk: when the kernel chooses (none), "
               "every --sync-interval (interval, the default), or before each write is answered "
               "(always); one-sided UCX writes are synced by the interval only");
  flags.Duration("sync-interval", &c.options.handler.sync_interval,
                 "how often --sync interval syncs (default 1s)");
}

// The port file, authentication, TLS, the Unix socket's mode, logging and metrics.
void DeclareSecurityFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("port-file", &c.port_file, "PATH", "write the bound HOST:PORT here once listening");
  flags.String("auth-file", &c.auth_file, "FILE",
               "require clients to authenticate with a secret of FILE (lines NAME SECRET "
               "PERM[,PERM...]; PERM: read, write, exec, load, admin, peer, all; mode 0600); "
               "docs/SECURITY.md");
  flags.Bool("format", &c.options.format,
             "format an existing --memory-file whose header is not a heap's (erasing it); without "
             "it ardmad refuses to start on such a file");
  flags.Bool("insecure", &c.options.insecure,
             "allow listening on a non-loopback address without --auth-file (anyone who reaches "
             "it may run code as this server's user)");
  flags.String("tls-cert", &c.options.tls_cert, "FILE",
               "serve TCP clients over TLS with this certificate chain (PEM); clients connect to "
               "tls://HOST:PORT");
  flags.String("tls-key", &c.options.tls_key, "FILE", "the private key of --tls-cert (PEM)");
  flags.String("tls-ca", &c.options.tls_ca, "FILE",
               "require client certificates signed by these CAs (mutual TLS); a certificate's "
               "common name authenticates as that --auth-file name");
  flags.String("unix-socket-mode", &c.unix_socket_mode, "MODE",
               "permissions of the --unix-socket file, octal; 0600 lets only this user connect");
  flags.Bool("quiet", &c.quiet, "log warnings and errors only");
  flags.String("metrics", &c.metrics_listen, "HOST:PORT",
               "serve Prometheus metrics (request counts and latency histograms by op, bytes, "
               "connections, parked requests, queue depth, heap, libraries) at "
               "http://HOST:PORT/metrics; unauthenticated, so loopback only unless --insecure");
}

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

// Thread counts, queues, frame and batch limits, and the timeouts.
absl::Status ApplyLimits(Config& c) {
  ardma::ServerOptions& o = c.options;
  if (c.io_threads < 1 || c.io_threads > 256 || c.workers < 0 || c.workers > 1024 ||
      c.worker_queue < 1 || c.max_batch < 1 || c.max_inflight < 1 || c.max_frame < 64 ||
      c.max_frame > (1ull << 31) || c.dma_cost_ns < 0 || c.dma_cost_ns > 1000000000) {
    return Invalid("a thread count, queue or limit is out of range (see --help)");
  }
  if (c.max_libraries < 1) return Invalid("--max-libraries must be at least 1");
  if (c.frame_timeout < absl::ZeroDuration() || c.frame_timeout > absl::Hours(24)) {
    return Invalid("--frame-timeout must be 0 to 24h");
  }
  if (c.idle_timeout < absl::ZeroDuration() || c.idle_timeout > absl::Hours(24 * 30)) {
    return Invalid("--idle-timeout must be 0 to 720h");
  }
  o.code_limits.max_libraries = static_cast<size_t>(c.max_libraries);
  o.io_threads = static_cast<int>(c.io_threads);
  o.handler.workers = static_cast<int>(c.workers);
  o.handler.worker_queue = static_cast<size_t>(c.worker_queue);
  o.handler.limits.frame_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(c.frame_timeout));
  o.handler.limits.idle_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(c.idle_timeout));
  o.handler.access_cost = absl::Nanoseconds(c.dma_cost_ns);
  o.handler.limits.max_payload_bytes = static_cast<uint32_t>(c.max_frame);
  o.handler.limits.max_batch_entries = static_cast<uint32_t>(c.max_batch);
  o.handler.limits.max_inflight_per_connection = static_cast<uint32_t>(c.max_inflight);
  return absl::OkStatus();
}

// The flags that name a mode: --ucx, --isolate, --sync.
absl::Status ApplyModes(Config& c) {
  ardma::ServerOptions& o = c.options;
  using Ucx = ardma::ServerOptions::Ucx;
  using Isolation = ardma::ServerOptions::Isolation;
  if (c.ucx == "auto" || c.ucx == "on" || c.ucx == "off") {
    o.ucx = c.ucx == "auto" ? Ucx::kAuto : c.ucx == "on" ? Ucx::kOn : Ucx::kOff;
  } else {
    return Invalid(absl::StrCat("--ucx must be auto, on or off, not '", c.ucx, "'"));
  }
  if (c.isolate == "none" || c.isolate == "untrusted" || c.isolate == "all") {
    o.isolate = c.isolate == "none"        ? Isolation::kNone
                : c.isolate == "untrusted" ? Isolation::kUntrusted
                                           : Isolation::kAll;
  } else {
    return Invalid(absl::StrCat("--isolate must be none, untrusted or all, not '", c.isolate, "'"));
  }
  if (c.isolate_cpu < 1) return Invalid("--isolate-cpu must be at least 1 second");
  if (o.isolate_spin < absl::ZeroDuration() || o.isolate_spin > absl::Seconds(1)) {
    return Invalid("--isolate-spin must be between 0 and 1s");
  }
  o.isolate_cpu_seconds = static_cast<uint64_t>(c.isolate_cpu);
  if (!c.isolate_user.empty() && ::geteuid() != 0) {
    return Invalid(absl::StrCat("--isolate-user needs ardmad to run as root (it runs as uid ",
                                ::geteuid(), ")"));
  }
  if (o.isolate != Isolation::kNone && ::geteuid() == 0) {
    std::string name = c.isolate_user.empty() ? "nobody" : c.isolate_user;
    absl::StatusOr<ardma::sandbox::User> user = ardma::sandbox::LookupUser(name);
    if (!user.ok()) return Invalid(absl::StrCat("--isolate-user: ", user.status().message()));
    o.isolate_user = *user;
  }
  absl::StatusOr<ardma::SyncPolicy> policy = ardma::ParseSyncPolicy(c.sync);
  if (!policy.ok()) return Invalid(policy.status().message());
  o.handler.sync = *policy;
  if (o.handler.sync_interval <= absl::ZeroDuration()) {
    return Invalid("--sync-interval must be positive");
  }
  return absl::OkStatus();
}

// --nic-cpu, --jvm-options, the heap's size, the registration limits and the socket's mode.
absl::Status ApplyPlacementAndStorage(Config& c) {
  ardma::ServerOptions& o = c.options;
  for (absl::string_view part : absl::StrSplit(c.nic_cpu, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo, hi;
    if (!absl::SimpleAtoi(range[0], &lo) || !absl::SimpleAtoi(range.back(), &hi) || lo < 0 ||
        hi < lo || hi > 4095) {
      return Invalid(absl::StrCat("--nic-cpu: '", part, "' is not a CPU or a range like 2-3"));
    }
    for (int cpu = lo; cpu <= hi; ++cpu) o.io_cpus.push_back(cpu);
  }
  o.jvm.options = absl::StrSplit(c.jvm_options, ' ', absl::SkipEmpty());
  if (c.register_max < 0) return Invalid("--register-max must be 0 or more");
  if (c.options.handler.registration.quarantine < absl::ZeroDuration()) {
    return Invalid("--register-quarantine must be 0 or more");
  }
  o.handler.registration.max_regions = static_cast<size_t>(c.register_max);
  o.handler.registration.max_bytes = c.register_max_bytes;
  if (!o.handler.registration.dir.empty() &&
      !std::filesystem::is_directory(o.handler.registration.dir)) {
    return Invalid(
        absl::StrCat("--register-dir ", o.handler.registration.dir, " is not a directory"));
  }
  o.memory_size = c.memory != 0 ? c.memory : (o.memory_file.empty() ? 1ull << 30 : 0);
  char* end = nullptr;
  unsigned long mode = std::strtoul(c.unix_socket_mode.c_str(), &end, 8);
  if (c.unix_socket_mode.empty() || *end != '\0' || mode > 0777) {
    return Invalid(absl::StrCat("--unix-socket-mode: '", c.unix_socket_mode,
                                "' is not an octal mode like 0600 or 0660"));
  }
  o.unix_socket_mode = static_cast<uint32_t>(mode);
  return absl::OkStatus();
}

absl::Status ApplyAuth(Config& c) {
  if (c.auth_file.empty()) return absl::OkStatus();
  absl::StatusOr<ardma::security::AuthTable> table =
      ardma::security::AuthTable::LoadFile(c.auth_file);
  if (!table.ok()) return Invalid(absl::StrCat("--auth-file: ", table.status().message()));
  ARDMA_LOG(kInfo, "clients must authenticate: %u secrets in %s", table->size(), c.auth_file);
  c.options.handler.auth = std::make_shared<const ardma::security::AuthTable>(*std::move(table));
  return absl::OkStatus();
}

// Membership of a cluster (docs/cluster.md).
void DeclareClusterFlags(ardma::FlagSet& flags, Config& c) {
  flags.String("cluster", &c.cluster, "etcd://HOST:PORT[,HOST:PORT...]/NAME",
               "join cluster NAME, whose membership and slot map live in that etcd: register "
               "this server (by an id kept in its heap, so the same after a restart with the same "
               "--memory-file) on a lease kept alive, and follow the slot map");
  flags.Duration("cluster-ttl", &c.cluster_ttl,
                 "the membership lease: a server that stops renewing it (it died, or cannot "
                 "reach etcd) leaves the cluster this long after (at least 2s, etcd's minimum); "
                 "when its slots have replicas, they go to a replica then, and the server, if it "
                 "runs again, ends with status 3 (restart it: it rejoins as a replica)");
  flags.String("advertise", &c.advertise, "HOST",
               "with --cluster: the host that clients reach this server at, registered with the "
               "listening port (default: the --listen host; needed when that is 0.0.0.0 or ::)");
}

absl::Status ApplyCluster(Config& c) {
  if (c.cluster.empty()) {
    return c.advertise.empty() ? absl::OkStatus() : Invalid("--advertise needs --cluster");
  }
  ARDMA_RETURN_IF_ERROR(ardma::cluster::ParseClusterAddress(c.cluster).status());
  absl::StatusOr<ardma::HostPort> listen = ardma::ParseHostPort(c.options.listen);
  bool wildcard = listen.ok() && (listen->host == "0.0.0.0" || listen->host == "::" ||
                                  listen->host.empty());
  if (wildcard && c.advertise.empty()) {
    return Invalid(absl::StrCat("--cluster with --listen ", c.options.listen,
                                " needs --advertise HOST: the address other hosts reach this "
                                "server at"));
  }
  bool host_chars = std::all_of(c.advertise.begin(), c.advertise.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ||
           ch == ':' || ch == '_';
  });
  if (!c.advertise.empty() && !host_chars) {
    return Invalid(absl::StrCat("--advertise: '", c.advertise, "' is not a host name or address"));
  }
  if (c.cluster_ttl < absl::Seconds(2) || c.cluster_ttl > absl::Hours(1)) {
    return Invalid("--cluster-ttl must be 2s to 1h");
  }
  return absl::OkStatus();
}

// Registers the running server in its --cluster (null without one).
absl::StatusOr<std::unique_ptr<ardma::cluster::Member>> JoinCluster(
    const Config& c, ardma::Server& server, ardma::SlotReplication* replication) {
  if (c.cluster.empty()) return nullptr;
  ARDMA_ASSIGN_OR_RETURN(uint64_t id, server.StableId());
  ardma::cluster::MemberOptions o{.ttl = c.cluster_ttl};
  ARDMA_ASSIGN_OR_RETURN(o.where, ardma::cluster::ParseClusterAddress(c.cluster));
  o.self.id = absl::StrCat(absl::Hex(id, absl::kZeroPad16));
  bool tls = !c.options.tls_cert.empty();
  std::string address = server.address();
  if (!c.advertise.empty()) {
    ARDMA_ASSIGN_OR_RETURN(ardma::HostPort listening, ardma::ParseHostPort(address));
    listening.host = c.advertise;
    address = listening.ToString();
  }
  o.self.addresses[tls ? "tls" : "tcp"] = (tls ? "tls://" : "") + address;
  if (!server.unix_socket().empty()) o.self.addresses["unix"] = "unix:" + server.unix_socket();
  if (server.ucx() != nullptr) o.self.addresses["ucx"] = "ucx://" + address;
  // Slots the map gives this server are served from then on (its fence: core/cluster/fence.h).
  // So is replication: the replicas of this server's slots, and the slots it replicates.
  auto replicated = std::make_shared<std::atomic<bool>>(false);
  o.on_map = [&server, replication, replicated,
              self = o.self.id](const ardma::cluster::SlotMap& map) {
    replicated->store(map.Replicated());
    replication->SetRoles(map.ReplicasOf(self), map.SlotsReplicatedOn(self), map.SlotsOf(self));
    return server.RunLocally(
        [&](ardma::Context& ctx) { return ardma::cluster::AdoptSlots(ctx, map, self); });
  };
  o.on_lease = [replication](absl::Time held_until) {
    replication->SetWritableUntil(held_until);
  };
  // Fail-stop: a member whose lease lapsed while its slots had replicas may have lost them to
  // failover, and holds a copy that others moved on from; it ends, to be restarted (it rejoins as
  // a replica and is filled). Its memory file holds everything it acknowledged.
  o.on_lapse = [replicated] {
    if (!replicated->load()) return;
    ARDMA_LOG(kError, "the cluster membership lapsed while this member's slots had replicas: "
                      "exiting (restart it: it rejoins as a replica)");
    std::_Exit(3);
  };
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<ardma::cluster::Member> member,
                         ardma::cluster::Member::Join(std::move(o)));
  ARDMA_LOG(kInfo, "joined cluster %s as %s", c.cluster, member->self().id);
  return member;
}

// How the server reaches its cluster's other members (both null without --cluster).
struct PeerLinks {
  // Context::CallPeer and replicated writes: clients that authenticate with the auth file's
  // secret granted `peer`.
  std::unique_ptr<ardma::cluster::PeerCalls> calls;
  std::unique_ptr<ardma::SlotReplication> replication;
};

PeerLinks PeerLinksFor(Config& c) {
  if (c.cluster.empty()) return {};
  ardma::cluster::Cluster::Options o;
  o.client.credentials_from_environment = false;
  o.client.connect_attempts = 1;  // a member that is down fails the call at once
  // Over UCX where a member has it (a replicated write waits for its replica's answer), else TCP.
  if (c.ucx != "off") o.transport = "ucx";
  const auto& auth = c.options.handler.auth;
  if (auth != nullptr && auth->peer().has_value()) {
    o.client.credentials = auth->peer();
  } else if (auth != nullptr) {
    ARDMA_LOG(kWarning,
              "--auth-file has no secret granted 'peer': calls this server's code makes to the "
              "other members of its cluster will be refused by members that require "
              "authentication");
  }
  PeerLinks links;
  links.calls = std::make_unique<ardma::cluster::PeerCalls>(c.cluster, std::move(o));
  links.replication = std::make_unique<ardma::SlotReplication>(links.calls.get());
  c.options.handler.peers = links.calls.get();
  c.options.handler.replication = links.replication.get();
  return links;
}

// Parses the command line into *c; an exit status if ardmad should end here (--help, bad flags).
std::optional<int> ParseConfig(int argc, char** argv, Config* c) {
  ardma::FlagSet flags("ardmad", kUsage);
  flags.ConfigFileFlag();  // --config /etc/ardma/ardmad.conf (the packaged service uses it)
  for (auto declare : {DeclareListeningFlags, DeclareStorageFlags, DeclareThreadsFlags,
                       DeclareLimitsFlags, DeclareCodeFlags, DeclarePlacementFlags, DeclareJvmFlags,
                       DeclareSyncFlags, DeclareSecurityFlags, DeclareClusterFlags}) {
    declare(flags, *c);
  }
  std::vector<std::string> positional;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &positional)) {
    return exit_code;
  }
  if (!positional.empty()) {
    std::cerr << "ardmad: unexpected argument '" << positional[0] << "' (see --help)\n";
    return 2;
  }
  for (auto apply : {ApplyLimits, ApplyModes, ApplyPlacementAndStorage, ApplyAuth, ApplyCluster}) {
    if (absl::Status s = apply(*c); !s.ok()) {
      std::cerr << "ardmad: " << s.message() << "\n";
      return 2;
    }
  }
  c->options.built_in_services = {
      &ardma::active_libraries::dht(),     &ardma::active_libraries::lock(),
      &ardma::active_libraries::list(),    &ardma::active_libraries::dfs(),
      &ardma::active_libraries::monitor(), &ardma::active_libraries::cc(),
      &ardma::active_libraries::grep(),    &ardma::active_libraries::find()};
  return std::nullopt;
}

// The Prometheus endpoint (--metrics), loopback only unless --insecure (FAILED_PRECONDITION).
absl::StatusOr<std::unique_ptr<ardma::MetricsServer>> StartMetrics(const Config& c,
                                                                   ardma::Server* server) {
  std::string host = c.metrics_listen.substr(0, c.metrics_listen.rfind(':'));
  bool loopback =
      host.rfind("127.", 0) == 0 || host == "[::1]" || host == "::1" || host == "localhost";
  if (!loopback && !c.options.insecure) {
    return absl::FailedPreconditionError(
        absl::StrCat("--metrics ", c.metrics_listen,
                     ": the metrics endpoint has no authentication; listen on 127.0.0.1 or pass "
                     "--insecure"));
  }
  absl::StatusOr<std::unique_ptr<ardma::MetricsServer>> metrics = ardma::MetricsServer::Start(
      c.metrics_listen, [server] { return server->handler().MetricsText(); });
  if (!metrics.ok()) {
    return absl::UnavailableError(absl::StrCat("--metrics: ", metrics.status().message()));
  }
  ARDMA_LOG(kInfo, "metrics at http://%s/metrics", (*metrics)->address());
  return metrics;
}

// A function that never returns (a loop in shipped code) must not keep the server from
// stopping: past the grace period the process ends without waiting for it. Memory-file data is
// in the page cache already, so nothing acknowledged is lost.
void ExitAfterGrace(absl::Duration grace) {
  if (grace <= absl::ZeroDuration()) return;
  std::thread([grace] {
    absl::SleepFor(grace);
    ARDMA_LOG(kError, "still running code %s after the stop signal: exiting without it",
              absl::FormatDuration(grace));
    std::_Exit(1);
  }).detach();
}

int Main(int argc, char** argv) {
  Config c;
  if (std::optional<int> exit_code = ParseConfig(argc, argv, &c)) return *exit_code;
  if (c.quiet) ardma::SetMinLogLevel(ardma::LogLevel::kWarning);
  // Abseil's lock-order graph costs a lookup on every Mutex::Lock; the tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<ardma::monitor::MonitorAgent> agent;
  if (c.monitor.interval != absl::ZeroDuration()) {
    absl::StatusOr<std::unique_ptr<ardma::monitor::MonitorAgent>> created =
        ardma::monitor::MonitorAgent::Create(c.monitor);
    if (!created.ok()) {
      std::cerr << "ardmad: --monitor-interval: " << created.status().message() << "\n";
      return 2;
    }
    agent = *std::move(created);
    c.options.extra_regions.push_back(agent->region());
  }
  ardma::StopSignals stop_signals;  // blocked in every thread; this one waits for them
  PeerLinks peers = PeerLinksFor(c);  // outlives the server
  absl::StatusOr<std::unique_ptr<ardma::Server>> server = ardma::Server::Start(c.options);
  if (!server.ok()) {
    std::cerr << "ardmad: " << server.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<ardma::MetricsServer> metrics;
  if (!c.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<ardma::MetricsServer>> started = StartMetrics(c, server->get());
    if (!started.ok()) {
      std::cerr << "ardmad: " << started.status().message() << "\n";
      return absl::IsFailedPrecondition(started.status()) ? 2 : 1;
    }
    metrics = *std::move(started);
  }
  absl::StatusOr<std::unique_ptr<ardma::cluster::Member>> member =
      JoinCluster(c, **server, peers.replication.get());
  if (!member.ok()) {
    std::cerr << "ardmad: --cluster " << c.cluster << ": " << member.status().message() << "\n";
    return 1;
  }
  // Failover and filling of replicas (their threads idle unless the map has replicas).
  std::unique_ptr<ardma::Failover> failover;
  if (*member) {
    failover = std::make_unique<ardma::Failover>(ardma::FailoverOptions{
        .where = *ardma::cluster::ParseClusterAddress(c.cluster),
        .self = (*member)->self().id,
        .ttl = c.cluster_ttl,
        .server = server->get(),
        .peers = peers.calls.get(),
        .replication = peers.replication.get()});
  }
  ardma::WritePortFile(c.port_file, (*server)->address());
  if (agent) agent->Start();
  int signal = stop_signals.Wait();
  ARDMA_LOG(kInfo, "received %s, stopping", signal == SIGINT ? "SIGINT" : "SIGTERM");
  ExitAfterGrace(c.stop_grace);
  if (failover) failover->Stop();
  if (*member) (*member)->Leave();  // clients stop being sent here first
  if (agent) agent->Stop();
  if (metrics) metrics->Stop();
  (*server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ardma::RunIsolatedWorkerIfAsked();  // returns unless started as an --isolate worker
  // Requests and replies of up to 16 MiB and a header come and go all the time: keep such
  // buffers in the heap, reused, instead of mapping and faulting in fresh pages for each (a DFS
  // read of 1 MiB spent more time in page faults than in copying; a copy between cluster members
  // in 16 MiB requests, 30 ns a byte).
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  return Main(argc, argv);
}
