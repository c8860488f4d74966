// ardma-bench: a load generator for ardmad in the style of redis-benchmark.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/load_generator.h"
#include "bench/workloads.h"
#include "core/cli/client_flags.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/cluster/member.h"
#include "core/cluster/router.h"
#include "core/host_port.h"
#include "core/status_macros.h"

namespace {

constexpr char kUsage[] =
    "Usage: ardma-bench [FLAGS]\n"
    "\n"
    "Drives a running ardmad with CLIENTS connections and prints throughput and latency\n"
    "percentiles per test, like redis-benchmark. Active mode sends one EXECUTE per operation from\n"
    "an event-loop thread (THREADS of them, each with every THREADS-th connection; each\n"
    "connection keeps PIPELINE requests in flight); RDMA mode runs the client-side one-sided\n"
    "algorithm on a thread per connection. Latency is from sending an operation's first request\n"
    "to receiving its last response.\n"
    "\n"
    "Tests: ping, dht.put, dht.get, dht.contains, dht.remove, list.append (to list ab-KEYINDEX,\n"
    "walking to its tail), lock.acquire (acquire + release of\n"
    "lock ardma-bench-KEY), dfs.read (DATA-SIZE bytes of a 16 MiB file by handle), dfs.stat.\n"
    "dht.* use table TABLE (created if missing); keys are key:NNNNNNNNNNNN drawn from KEYSPACE\n"
    "keys by a fixed-seed hash. lock.acquire runs a blocking client per connection in both modes.\n"
    "The server defaults to $ARDMA_SERVER, then 127.0.0.1:15712. With --server\n"
    "etcd://HOST:PORT/NAME the dht.* tests run on that cluster: connection i goes to member\n"
    "i mod N (over UCX with --ucx) and draws only keys that member holds, and by default an\n"
    "event loop drives each member (as redis-benchmark --cluster does: a thread per node); with\n"
    "--member HOST:PORT as well, every connection goes to that one member and draws its keys\n"
    "(one load generator per member, e.g. each pinned beside its server).\n"
    "\n"
    "  ardma-bench -t dht.put,dht.get -c 50 -n 200000 -d 3 -r 10000\n"
    "  ardma-bench -t dht.get --mode rdma -c 8 -n 20000 --json\n"
    "\n"
    "Exit status: 0 when every operation succeeded, 1 when some failed (the first error is\n"
    "printed), 2 for bad flags.";

// With --server etcd://...: the members' addresses (over UCX with `ucx`) for the connections, and
// the keys each holds for the connections that go to it. Returns a client of each member, to
// prepare the tests on. With `only` (a member's address), the connections all go to that member.
absl::StatusOr<std::vector<ardma::Client*>> UseCluster(ardma::cluster::Cluster& cluster,
                                                       const std::string& only,
                                                       ardma::bench::LoadOptions& load,
                                                       ardma::bench::WorkloadOptions& w) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<ardma::Client*> members, cluster.All());
  load.addresses.clear();
  for (ardma::Client* member : members) load.addresses.push_back(member->address());
  w.key_sets.assign(members.size(), {});
  for (uint64_t n = 0; n < std::max<uint64_t>(w.keyspace, 1); ++n) {
    ARDMA_ASSIGN_OR_RETURN(ardma::Client * owner,
                           cluster.ForKey(w.table, ardma::bench::NumberedKey(n)));
    size_t index = std::find(members.begin(), members.end(), owner) - members.begin();
    w.key_sets[index].push_back(n);
  }
  w.servers = members;
  if (only.empty()) return members;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i]->address() != only && load.addresses[i] != only) continue;
    load.addresses = {load.addresses[i]};
    w.key_sets = {w.key_sets[i]};
    w.servers = {members[i]};
    return members;
  }
  return absl::NotFoundError(absl::StrCat("--member ", only, " is not a server of cluster ",
                                          load.address, " (its servers: ",
                                          absl::StrJoin(load.addresses, ", "), ")"));
}

// What the tests run against: one server, or a cluster's members.
struct Targets {
  std::unique_ptr<ardma::cluster::Cluster> cluster;
  std::unique_ptr<ardma::Client> single;
  std::vector<ardma::Client*> setups;  // what the tests are prepared on: the server, or each member
};

absl::Status Connect(bool ucx, const std::string& member, ardma::bench::LoadOptions& load, ardma::bench::WorkloadOptions& w,
                     Targets* targets) {
  if (!ardma::cluster::IsClusterAddress(load.address)) {
    if (!member.empty()) return absl::InvalidArgumentError("--member needs --server etcd://...");
    ARDMA_ASSIGN_OR_RETURN(targets->single, ardma::Client::Connect(load.address));
    targets->setups = {targets->single.get()};
    return absl::OkStatus();
  }
  ardma::cluster::Cluster::Options cluster_options;
  cluster_options.transport = ucx ? "ucx" : "tcp";
  ARDMA_ASSIGN_OR_RETURN(targets->cluster,
                         ardma::cluster::Cluster::Connect(load.address, cluster_options));
  ARDMA_ASSIGN_OR_RETURN(targets->setups, UseCluster(*targets->cluster, member, load, w));
  return absl::OkStatus();
}

struct Row {
  std::string test;
  ardma::bench::LoadResult result;
};

void PrintText(const Row& row, const ardma::bench::LoadOptions& load,
               const ardma::bench::WorkloadOptions& w) {
  const ardma::bench::LoadResult& r = row.result;
  std::printf("====== %s ======\n", row.test.c_str());
  std::printf(
      "  %llu operations in %.3f s, %d connections, pipeline %d, %s mode, %llu-byte values\n",
      static_cast<unsigned long long>(r.completed), absl::ToDoubleSeconds(r.elapsed),
      load.connections, load.pipeline, ardma::ModeName(w.mode),
      static_cast<unsigned long long>(w.value_size));
  std::printf("  throughput: %.0f operations/s\n", r.OpsPerSecond());
  std::printf("  latency (ms): avg %.3f  p50 %.3f  p95 %.3f  p99 %.3f  max %.3f\n", r.AverageMs(),
              r.PercentileMs(50), r.PercentileMs(95), r.PercentileMs(99), r.PercentileMs(100));
  std::printf("  round trips/op %.2f, bytes/op %.1f\n", r.RoundTripsPerOp(), r.BytesPerOp());
  if (r.errors > 0) {
    std::printf("  errors: %llu (first: %s)\n", static_cast<unsigned long long>(r.errors),
                r.first_error.c_str());
  }
  std::printf("\n");
}

std::string CsvLine(const Row& row, const ardma::bench::LoadOptions& load,
                    const ardma::bench::WorkloadOptions& w) {
  const ardma::bench::LoadResult& r = row.result;
  return absl::StrFormat("%s,%s,%d,%d,%d,%d,%.6f,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.1f,%d",
                         row.test, ardma::ModeName(w.mode), load.connections, load.pipeline,
                         w.value_size, r.completed, absl::ToDoubleSeconds(r.elapsed),
                         r.OpsPerSecond(), r.AverageMs(), r.PercentileMs(50), r.PercentileMs(95),
                         r.PercentileMs(99), r.PercentileMs(100), r.RoundTripsPerOp(),
                         r.BytesPerOp(), r.errors);
}

std::string JsonObject(const Row& row, const ardma::bench::LoadOptions& load,
                       const ardma::bench::WorkloadOptions& w) {
  const ardma::bench::LoadResult& r = row.result;
  return absl::StrFormat(
      "{\"test\": \"%s\", \"mode\": \"%s\", \"connections\": %d, \"pipeline\": %d, "
      "\"value_size\": %d, \"operations\": %d, \"seconds\": %.6f, \"ops_per_sec\": %.1f, "
      "\"latency_ms\": {\"avg\": %.4f, \"p50\": %.4f, \"p95\": %.4f, \"p99\": %.4f, "
      "\"max\": %.4f}, \"round_trips_per_op\": %.3f, \"bytes_per_op\": %.1f, \"errors\": %d}",
      row.test, ardma::ModeName(w.mode), load.connections, load.pipeline, w.value_size, r.completed,
      absl::ToDoubleSeconds(r.elapsed), r.OpsPerSecond(), r.AverageMs(), r.PercentileMs(50),
      r.PercentileMs(95), r.PercentileMs(99), r.PercentileMs(100), r.RoundTripsPerOp(),
      r.BytesPerOp(), r.errors);
}

}  // namespace

int main(int argc, char** argv) {
  ardma::bench::LoadOptions load;
  load.address = ardma::DefaultServerAddress();
  ardma::bench::WorkloadOptions w;
  std::string tests = "ping,dht.put,dht.get";
  std::string mode = "active";
  std::string member;
  int64_t connections = load.connections;
  int64_t requests = static_cast<int64_t>(load.requests);
  int64_t pipeline = load.pipeline;
  int64_t threads = 0;
  int64_t keyspace = static_cast<int64_t>(w.keyspace);
  int64_t seed = static_cast<int64_t>(w.seed);
  bool csv = false, json = false, ucx = false;

  ardma::FlagSet flags("ardma-bench", kUsage);
  ardma::ClientFlags client;
  client.server = load.address;
  client.Declare(flags);
  flags.String("tests", &tests, "LIST", "comma-separated tests to run, in order");
  flags.Int("clients", &connections, "N", "connections");
  flags.Int("requests", &requests, "N", "operations per test, over all connections");
  flags.Bytes("data-size", &w.value_size, "value (or ping payload) size in bytes");
  flags.Int("keyspace", &keyspace, "N", "distinct keys (0: one key)");
  flags.Int("pipeline", &pipeline, "N", "requests in flight per connection (active mode)");
  flags.Int("threads", &threads, "N",
            "event-loop threads (active mode); 0: one, or one per member on a cluster");
  flags.String("mode", &mode, "active|rdma", "run the service next to the data or one-sided");
  flags.String("table", &w.table, "NAME", "DHT table the dht.* tests use");
  flags.Int("seed", &seed, "N", "seed of the key sequence");
  flags.Bool("csv", &csv, "print one CSV line per test (with a header)");
  flags.Bool("ucx", &ucx, "on a cluster (--server etcd://...), reach its members over UCX");
  flags.String("member", &member, "HOST:PORT",
               "on a cluster, drive only the member at this address (see `ardma cluster status`)");
  ardma::JsonFlag(flags, &json, "the results as a JSON array, one object per test");
  flags.Short('t', "tests");
  flags.Short('c', "clients");
  flags.Short('n', "requests");
  flags.Short('d', "data-size");
  flags.Short('r', "keyspace");
  flags.Short('P', "pipeline");
  std::vector<std::string> positional;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &positional)) {
    return *exit_code;
  }
  auto usage_error = [](const std::string& message) {
    std::cerr << "ardma-bench: " << message << "\n";
    return 2;
  };
  if (!positional.empty()) return usage_error("unexpected argument '" + positional[0] + "'");
  if (absl::Status s = client.Export(); !s.ok()) {
    return usage_error(std::string(s.message()));
  }
  load.address = client.server;
  absl::StatusOr<std::optional<ardma::security::Credentials>> credentials =
      ardma::security::CredentialsFromEnvironment();
  if (!credentials.ok()) return usage_error(std::string(credentials.status().message()));
  load.credentials = *credentials;
  absl::StatusOr<ardma::Mode> parsed_mode = ardma::ParseMode(mode);
  if (!parsed_mode.ok()) return usage_error(std::string(parsed_mode.status().message()));
  w.mode = *parsed_mode;
  if (connections < 1 || connections > 10000) return usage_error("--clients must be 1 to 10000");
  if (requests < 1) return usage_error("--requests must be at least 1");
  if (pipeline < 1 || pipeline > 1024) return usage_error("--pipeline must be 1 to 1024");
  if (pipeline > 1 && w.mode == ardma::Mode::kRdma) {
    return usage_error("--pipeline applies to active mode only");
  }
  if (threads < 0 || threads > 256) return usage_error("--threads must be 0 to 256");
  if (keyspace < 0) return usage_error("--keyspace must not be negative");
  if (csv && json) return usage_error("--csv and --json exclude each other");
  load.connections = static_cast<int>(connections);
  load.requests = static_cast<uint64_t>(requests);
  load.pipeline = static_cast<int>(pipeline);
  w.keyspace = static_cast<uint64_t>(keyspace);
  w.seed = static_cast<uint64_t>(seed);
  std::vector<std::string> test_list = absl::StrSplit(tests, ',', absl::SkipEmpty());
  if (test_list.empty()) return usage_error("--tests is empty");
  for (const std::string& t : test_list) {
    bool known = false;
    for (const std::string& k : ardma::bench::KnownTests()) known |= k == t;
    if (!known) return usage_error("unknown test '" + t + "' (see --help)");
  }

  const bool on_cluster = ardma::cluster::IsClusterAddress(load.address);
  for (const std::string& t : test_list) {
    if (on_cluster && !t.starts_with("dht.")) {
      return usage_error("on a cluster only the dht.* tests run");
    }
  }
  Targets targets;
  if (absl::Status s = Connect(ucx, member, load, w, &targets); !s.ok()) {
    std::cerr << "ardma-bench: " << s << "\n";
    return 1;
  }
  const std::vector<ardma::Client*>& setups = targets.setups;
  load.threads = threads > 0 ? static_cast<int>(threads)
                             : std::max<int>(1, static_cast<int>(load.addresses.size()));
  if (csv) {
    std::printf(
        "test,mode,connections,pipeline,value_size,operations,seconds,ops_per_sec,avg_ms,p50_ms,"
        "p95_ms,p99_ms,max_ms,round_trips_per_op,bytes_per_op,errors\n");
  }
  if (json) std::printf("[");
  bool failed = false;
  for (size_t i = 0; i < test_list.size(); ++i) {
    absl::Status prepared;
    for (size_t m = 1; m < setups.size() && prepared.ok(); ++m) {  // RunTest prepares the first
      prepared = ardma::bench::PrepareTest(test_list[i], w, *setups[m]);
    }
    absl::StatusOr<ardma::bench::LoadResult> r =
        prepared.ok() ? ardma::bench::RunTest(test_list[i], load, w, *setups[0])
                      : absl::StatusOr<ardma::bench::LoadResult>(prepared);
    if (!r.ok()) {
      std::cerr << "ardma-bench: " << test_list[i] << ": " << r.status() << "\n";
      failed = true;
      break;
    }
    Row row{test_list[i], *std::move(r)};
    if (row.result.errors > 0) {
      failed = true;
      if (csv || json) {
        std::cerr << "ardma-bench: " << row.test << ": " << row.result.errors
                  << " operations failed, first: " << row.result.first_error << "\n";
      }
    }
    if (csv) {
      std::printf("%s\n", CsvLine(row, load, w).c_str());
    } else if (json) {
      std::printf("%s\n  %s", i == 0 ? "" : ",", JsonObject(row, load, w).c_str());
    } else {
      PrintText(row, load, w);
    }
    std::fflush(stdout);
  }
  if (json) std::printf("\n]\n");
  return failed ? 1 : 0;
}
