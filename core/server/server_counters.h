// ServerCounters: the Active RDMA paper's evaluation counters, kept by the server and served by
// STATS. Relaxed atomics: each counter is independent and only read for reporting. Thread-safe.
#ifndef ARDMA_CORE_SERVER_SERVER_COUNTERS_H_
#define ARDMA_CORE_SERVER_SERVER_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/active/local_context.h"
#include "core/wire/messages.h"

namespace ardma {

// Latency of the requests the server answers, from the frame's arrival to its answer (one-sided
// UCX operations never reach the server and are not in it). Buckets' upper bounds, in seconds.
inline constexpr std::array<double, 22> kLatencyBounds = {
    1e-6,   2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
    5e-3,   1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 0.5,  1,      2.5,  5,    10};

struct LatencyHistogram {
  std::array<std::atomic<uint64_t>, kLatencyBounds.size() + 1> buckets{};  // the last: beyond
  std::atomic<uint64_t> sum_ns{0};
  std::atomic<uint64_t> count{0};

  void Record(uint64_t ns);
  // Cumulative counts per bound (Prometheus' le buckets), without the +Inf one.
  std::array<uint64_t, kLatencyBounds.size()> Cumulative() const;
};

struct ServerCounters {
  using Counter = std::atomic<uint64_t>;

  std::array<Counter, wire::kNumOps> requests{};        // by op
  std::array<LatencyHistogram, wire::kNumOps> latency;  // by op
  Counter bytes_in{0};                                  // frames received, headers included
  Counter bytes_out{0};                                 // frames sent
  Counter errors{0};                                    // non-OK responses
  Counter connections_accepted{0};
  Counter connections_open{0};
  // Answer bytes queued on every stream connection and not yet taken by its socket (a level,
  // bounded by WireLimits::max_queued_bytes_total).
  Counter queued_bytes{0};
  Counter protocol_errors{0};    // connections closed for unparseable frames
  Counter ucx_held{0};           // UCX requests held because their session was full
  Counter ucx_overruns{0};       // UCX sessions closed for sending far beyond their limit
  Counter auth_ok{0};            // connections authenticated
  Counter auth_refused{0};       // AUTH failed, or a request before AUTH: answered and closed
  Counter permission_denied{0};  // requests beyond the connection's permissions
  Counter execute_ns{0};         // time spent running active functions
  Counter executes_inline{0};
  Counter executes_pooled{0};
  Counter executes_expired{0};      // dropped: deadline passed before start
  Counter executes_rejected{0};     // worker queue full
  Counter executes_rescheduled{0};  // backed off inline: moved to a worker
  Counter parked_total{0};
  Counter executes_resumed{0};  // resumable parked requests run again
  Counter close_hooks_run{0};
  // Memory operations performed by active code (not by one-sided ops).
  Counter active_reads{0};
  Counter active_writes{0};
  Counter active_cas{0};
  Counter active_fetch_adds{0};
  Counter active_bytes_read{0};
  Counter active_bytes_written{0};
  Counter active_calls{0};
  // Server-to-server calls (Context::CallPeer): made by this server's active code, received from
  // a peer, and refused (the peer flag from a connection without the `peer` permission).
  Counter peer_calls_out{0};
  Counter peer_calls_in{0};
  Counter peer_refused{0};
  // File-backed memory synced to its device (--sync).
  Counter sync_flushes{0};
  Counter sync_ns{0};
  Counter sync_errors{0};

  static void Add(Counter& c, uint64_t v) { c.fetch_add(v, std::memory_order_relaxed); }
  void AddActive(const ActiveOpCounts& counts);
  // Snapshot as (name, value) pairs, in a stable order.
  std::vector<wire::StatsEntry> Snapshot() const;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_SERVER_COUNTERS_H_
