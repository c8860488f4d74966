// ServerCounters: the Active RDMA paper's evaluation counters, kept by the server and served by
// STATS. Every thread that counts has its own set of counts (one writer each, so a count is a
// plain load and store, never an atomic read-modify-write on a cache line the other threads
// write too); reading sums the sets. Thread-safe.
#ifndef ARDMA_CORE_SERVER_SERVER_COUNTERS_H_
#define ARDMA_CORE_SERVER_SERVER_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/active/local_context.h"
#include "core/wire/messages.h"

namespace ardma {

// Latency of the requests the server answers, from the frame's arrival to its answer (one-sided
// UCX operations never reach the server and are not in it). Buckets' upper bounds, in seconds.
inline constexpr std::array<double, 22> kLatencyBounds = {
    1e-6,   2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
    5e-3,   1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 0.5,  1,      2.5,  5,    10};

// A count written by one thread and read by any.
class Count {
 public:
  void operator+=(uint64_t n) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// One thread's latencies of one op.
struct LatencyHistogram {
  std::array<Count, kLatencyBounds.size() + 1> buckets;  // the last: beyond
  Count sum_ns;
  Count count;

  void Record(uint64_t ns);
};

// Every thread's latencies of one op, summed.
struct LatencyTotals {
  std::array<uint64_t, kLatencyBounds.size() + 1> buckets{};
  uint64_t sum_ns = 0;
  uint64_t count = 0;

  // Cumulative counts per bound (Prometheus' le buckets), without the +Inf one.
  std::array<uint64_t, kLatencyBounds.size()> Cumulative() const;
};

// The counters, in STATS' order; their names are in server_counters.cc.
enum class Stat : uint8_t {
  kBytesIn,              // frames received, headers included
  kBytesOut,             // frames sent
  kErrors,               // non-OK responses
  kConnectionsAccepted,  //
  kConnectionsOpen,      // a level: +1 when one opens, -1 (any thread) when it closes
  kProtocolErrors,       // connections closed for unparseable frames
  kUcxHeld,              // UCX requests held because their session was full
  kUcxOverruns,          // UCX sessions closed for sending far beyond their limit
  kAuthOk,               // connections authenticated
  kAuthRefused,          // AUTH failed, or a request before AUTH: answered and closed
  kPermissionDenied,     // requests beyond the connection's permissions
  kExecuteNs,            // time spent running active functions
  kExecutesInline,
  kExecutesPooled,
  kExecutesExpired,      // dropped: deadline passed before start
  kExecutesRejected,     // worker queue full
  kExecutesRescheduled,  // backed off inline: moved to a worker
  kParkedTotal,
  kExecutesResumed,  // resumable parked requests run again
  kCloseHooksRun,
  // Memory operations performed by active code (not by one-sided ops).
  kActiveReads,
  kActiveWrites,
  kActiveCas,
  kActiveFetchAdds,
  kActiveBytesRead,
  kActiveBytesWritten,
  kActiveCalls,
  // Server-to-server calls (Context::CallPeer): made by this server's active code, received from
  // a peer, and refused (the peer flag from a connection without the `peer` permission).
  kPeerCallsOut,
  kPeerCallsIn,
  kPeerRefused,
  // Replicated slots (docs/cluster.md, "Replication"): writes forwarded to the replicas as their
  // primary, those that failed to reach one, writes applied as a replica, and those a replica
  // refused (it had missed an earlier one).
  kReplicatedWrites,
  kReplicationFailures,
  kReplicaApplied,
  kReplicaRefused,
  // File-backed memory synced to its device (--sync).
  kSyncFlushes,
  kSyncNs,
  kSyncErrors,
  kCount  // (the number of counters)
};

class ServerCounters {
 public:
  ServerCounters();
  ~ServerCounters();
  ServerCounters(const ServerCounters&) = delete;
  ServerCounters& operator=(const ServerCounters&) = delete;

  void Add(Stat stat, uint64_t n) { Mine().stats[static_cast<size_t>(stat)] += n; }
  // (A level may go down: `n` wraps, and so does the sum back.)
  void Subtract(Stat stat, uint64_t n) { Add(stat, -n); }
  void AddRequest(uint8_t op) { Mine().requests[op] += 1; }
  // This thread's histogram of `op`: record into it on this thread only.
  LatencyHistogram& Latency(uint8_t op) { return Mine().latency[op]; }
  void AddActive(const ActiveOpCounts& counts);

  // Sums over every thread.
  uint64_t Get(Stat stat) const;
  uint64_t Requests(uint8_t op) const;
  LatencyTotals Latencies(uint8_t op) const;
  // Snapshot as (name, value) pairs, in a stable order.
  std::vector<wire::StatsEntry> Snapshot() const;

  // Answer bytes queued on every stream connection and not yet taken by its socket: a level
  // bounded by WireLimits::max_queued_bytes_total, read on every send, so one shared atomic.
  std::atomic<uint64_t> queued_bytes{0};

 private:
  struct alignas(64) Set {
    std::array<Count, static_cast<size_t>(Stat::kCount)> stats;
    std::array<Count, wire::kNumOps> requests;
    std::array<LatencyHistogram, wire::kNumOps> latency;
  };
  Set& Mine();
  Set& MineSlow();
  template <typename F>
  void ForEachSet(F f) const;

  const uint64_t id_;  // unique in the process, so a thread's cached set is never another's
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::thread::id, std::unique_ptr<Set>> sets_ ABSL_GUARDED_BY(mu_);
};

namespace server_counters_internal {
// The set this thread counts in, and whose it is.
struct ThreadSet {
  uint64_t owner = 0;
  void* set = nullptr;
};
inline thread_local ThreadSet cached;
}  // namespace server_counters_internal

inline ServerCounters::Set& ServerCounters::Mine() {
  server_counters_internal::ThreadSet& cached = server_counters_internal::cached;
  if (cached.owner == id_) return *static_cast<Set*>(cached.set);
  return MineSlow();
}

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_SERVER_COUNTERS_H_
