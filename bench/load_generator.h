// Load generation for ardma-bench, in the two shapes the modes need.
//
// Active mode: every operation is one request frame, so one event-loop thread drives all the
// connections, the way redis-benchmark drives Redis: each connection keeps `pipeline` requests in
// flight and sends the next as soon as a response comes back. A request's latency runs from when
// its frame is queued to when its response has been read. With a `ucx://` address the same thread
// drives one UCX worker with an endpoint per connection (a UCX session each, its requests and
// responses active messages), polling the worker instead of sleeping in epoll; a poll that finds
// nothing is paced as a Client's wait is (PollPacer: past a few microseconds it yields the CPU,
// past 100 us it sleeps), so on a host with fewer cores than busy threads the server is not
// kept from the CPU by a load generator that only waits for it.
//
// RDMA mode: an operation is a client-side algorithm of several dependent round trips, so each
// connection gets a thread that runs operations back to back with a blocking Client.
//
//   LoadOptions options{.address = "127.0.0.1:15712", .connections = 50, .requests = 100000};
//   ARDMA_ASSIGN_OR_RETURN(LoadResult r, RunEventLoop(options, [](uint64_t, int, std::string* out) {
//     out->append("hello");
//     return wire::Op::kPing;
//   }));
//   std::printf("%.0f ops/s, p99 %.3f ms\n", r.OpsPerSecond(), r.PercentileMs(99));
#ifndef ARDMA_BENCH_LOAD_GENERATOR_H_
#define ARDMA_BENCH_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/security/auth.h"
#include "core/client/client.h"
#include "core/wire/frame.h"

namespace ardma::bench {

struct LoadOptions {
  std::string address;
  // Several servers (a cluster's members): connection c goes to addresses[c % size]; empty: all
  // to `address`.
  std::vector<std::string> addresses;
  const std::string& AddressOf(int connection) const {
    return addresses.empty() ? address : addresses[connection % addresses.size()];
  }
  int connections = 50;
  uint64_t requests = 100000;  // operations in all, over every connection
  int pipeline = 1;            // requests in flight per connection (event loop only)
  // Event loop only: this many loops, each on its own thread with every threads-th connection
  // (connection c on loop c % threads: on a cluster with one loop per member, each loop drives
  // one member, as redis-benchmark --cluster does) and its share of the requests.
  int threads = 1;
  absl::Duration connect_timeout = absl::Seconds(5);
  // A response slower than this fails the run (a lost response would otherwise hang it).
  absl::Duration response_timeout = absl::Seconds(60);
  // Authenticate every connection as this (docs/SECURITY.md); unset: no authentication.
  std::optional<security::Credentials> credentials;
  // Requests that may run twice (reads): sent with client id 0, so the server keeps no record of
  // them for retries (CallOptions::idempotent, as DhtClient sends its reads).
  bool idempotent = false;
};

struct LoadResult {
  uint64_t completed = 0;  // operations answered (including errors)
  uint64_t errors = 0;     // operations answered with an error status
  std::string first_error;
  absl::Duration elapsed;
  uint64_t round_trips = 0;  // request flights, as ClientCounters counts them
  uint64_t bytes = 0;        // sent + received, frame headers included
  std::vector<uint64_t> latency_ns;  // one per completed operation, sorted once the run ends

  double OpsPerSecond() const;
  double AverageMs() const;
  double PercentileMs(double p) const;  // p in [0, 100]
  double RoundTripsPerOp() const;
  double BytesPerOp() const;
};

// Appends the request payload of operation `i`, to be sent on connection `connection`, to
// *payload and returns the request's op; the generator frames it (header, request and client ids).
using FrameMaker = std::function<wire::Op(uint64_t i, int connection, std::string* payload)>;

// Active mode: one thread (or `threads`), `connections` sockets. Every response must be a
// well-formed response frame to a request in flight; a broken connection or a malformed frame
// ends the run with UNAVAILABLE / DATA_LOSS. Error statuses from the server are counted, not
// fatal.
absl::StatusOr<LoadResult> RunEventLoop(const LoadOptions& options, const FrameMaker& make_frame);

// Operation `i` on one thread's client: OK, or the error it met (counted, not fatal).
using ThreadOp = std::function<absl::Status(uint64_t i)>;
// Makes a thread's operation over its own Client (which outlives it); may warm up (resolve names,
// ship code) before the clock starts.
using ThreadOpFactory = std::function<absl::StatusOr<ThreadOp>(Client& client, int connection)>;

// RDMA mode: `connections` threads, each with its own Client, sharing out `requests` operations.
// Round trips and bytes count from after the factories ran.
absl::StatusOr<LoadResult> RunThreads(const LoadOptions& options, const ThreadOpFactory& factory);

}  // namespace ardma::bench

#endif  // ARDMA_BENCH_LOAD_GENERATOR_H_
