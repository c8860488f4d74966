// What the benchmark binaries share: one in-process ardmad per binary, clients on it, the
// round-trip and byte counters every benchmark reports, and the floor they are compared with (a
// raw TCP ping-pong of the same size against an echo thread in the same process).
#ifndef ARDMA_BENCH_BENCH_SUPPORT_H_
#define ARDMA_BENCH_BENCH_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "benchmark/benchmark.h"
#include "core/client/client.h"
#include "core/active/active_library.h"
#include "core/server/request_handler.h"
#include "core/server/server.h"

namespace ardma::bench {

// The binary's ardmad on 127.0.0.1:0 (and a Unix socket), 256 MiB, started on first use and
// stopped at exit. ARDMA_BENCH_IO_THREADS sets its --io-threads, ARDMA_BENCH_DMA_COST_NS its
// --dma-cost-ns, ARDMA_BENCH_MEMORY_FILE its --memory-file.
Server& SharedServer();
// The shared server's --register-dir (in /dev/shm; removed at exit).
const std::string& BenchRegisterDir();

// kUcx: ucx://, one-sided READ/WRITE/CAS/FETCH_ADD (UCX_TLS as the environment says).
enum class Transport { kTcp, kUnix, kUcx };
// True if ARDMA_BENCH_TRANSPORT=ucx is in the environment: kTcp clients connect over UCX instead.
bool BenchOverUcx();
// A new connection to SharedServer(); on failure marks `state` skipped and returns null.
std::unique_ptr<Client> NewClient(benchmark::State& state, Transport transport = Transport::kTcp,
                                  const ClientOptions& options = {});

// Sets round_trips/op and bytes/op from the client's counters since `rt0`/`bytes0`.
void ReportCounters(benchmark::State& state, Client& client, uint64_t rt0, uint64_t bytes0);

// A RequestHandler called on the caller's thread, its answers kept in `last` (status and
// payload) and otherwise dropped: the server's own cost of a request, no transport, no client.
// Region 0 is a formatted heap of `heap_bytes`, so services run as they do in ardmad.
class HandlerHarness {
 public:
  explicit HandlerHarness(uint64_t heap_bytes = 1 << 20);
  ~HandlerHarness();
  // Loads a native library; false (state skipped) on failure.
  bool Load(benchmark::State& state, const ActiveLibrary& library);
  // Handles one request as client 0x5eed (as client 0, which keeps no retry record, if
  // `idempotent`, as ardma-bench and DhtClient send reads); each call takes the next request id.
  void Handle(wire::Op op, std::string_view payload, bool idempotent = false);
  // The last answer's status (an absl::StatusCode value) and payload.
  uint16_t last_status() const;
  std::string_view last_payload() const;
  RegionTable& regions() { return regions_; }

 private:
  class Sink;
  RegionTable regions_;
  CodeRegistry registry_;
  std::unique_ptr<RequestHandler> handler_;
  std::shared_ptr<Sink> sink_;
  wire::FrameHeader header_;
};

// The floor: send `size` bytes to an echo thread and read them back, blocking, TCP_NODELAY.
void RunRawTcpPingPong(benchmark::State& state, size_t size);

// Runs `op(client)` (returning false on failure) on a new connection and reports the counters.
template <typename Op>
void RunClientBenchmark(benchmark::State& state, Op op, Transport transport = Transport::kTcp) {
  std::unique_ptr<Client> client = NewClient(state, transport);
  if (client == nullptr) return;
  uint64_t rt0 = client->counters().round_trips;
  uint64_t bytes0 = client->counters().bytes_sent + client->counters().bytes_received;
  for (auto _ : state) {
    if (!op(*client)) {
      state.SkipWithError("operation failed");
      break;
    }
  }
  ReportCounters(state, *client, rt0, bytes0);
}

}  // namespace ardma::bench

#endif  // ARDMA_BENCH_BENCH_SUPPORT_H_
