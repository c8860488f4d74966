#include "core/server/server_counters.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ardma {

void LatencyHistogram::Record(uint64_t ns) {
  double seconds = static_cast<double>(ns) * 1e-9;
  size_t b = 0;
  while (b < kLatencyBounds.size() && seconds > kLatencyBounds[b]) ++b;
  buckets[b].fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(ns, std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
}

std::array<uint64_t, kLatencyBounds.size()> LatencyHistogram::Cumulative() const {
  std::array<uint64_t, kLatencyBounds.size()> out{};
  uint64_t running = 0;
  for (size_t b = 0; b < kLatencyBounds.size(); ++b) {
    running += buckets[b].load(std::memory_order_relaxed);
    out[b] = running;
  }
  return out;
}

void ServerCounters::AddActive(const ActiveOpCounts& c) {
  Add(active_reads, c.reads);
  Add(active_writes, c.writes);
  Add(active_cas, c.cas);
  Add(active_fetch_adds, c.fetch_adds);
  Add(active_bytes_read, c.bytes_read);
  Add(active_bytes_written, c.bytes_written);
  Add(active_calls, c.calls);
  Add(peer_calls_out, c.peer_calls);
}

std::vector<wire::StatsEntry> ServerCounters::Snapshot() const {
  std::vector<wire::StatsEntry> out;
  auto put = [&out](const char* name, const Counter& c) {
    out.emplace_back(name, c.load(std::memory_order_relaxed));
  };
  for (int op = 1; op < wire::kNumOps; ++op) {
    out.emplace_back(
        absl::StrCat("requests.", absl::AsciiStrToLower(wire::OpName(static_cast<wire::Op>(op)))),
        requests[op].load(std::memory_order_relaxed));
  }
  put("bytes_in", bytes_in);
  put("bytes_out", bytes_out);
  put("errors", errors);
  put("connections.accepted", connections_accepted);
  put("connections.open", connections_open);
  put("connections.queued_bytes", queued_bytes);
  put("connections.protocol_errors", protocol_errors);
  put("ucx.held", ucx_held);
  put("ucx.overruns", ucx_overruns);
  put("auth.ok", auth_ok);
  put("auth.refused", auth_refused);
  put("auth.permission_denied", permission_denied);
  put("execute.ns", execute_ns);
  put("execute.inline", executes_inline);
  put("execute.pooled", executes_pooled);
  put("execute.expired", executes_expired);
  put("execute.rejected", executes_rejected);
  put("execute.rescheduled", executes_rescheduled);
  put("parked.total", parked_total);
  put("execute.resumed", executes_resumed);
  put("close_hooks.run", close_hooks_run);
  put("active.reads", active_reads);
  put("active.writes", active_writes);
  put("active.cas", active_cas);
  put("active.fetch_adds", active_fetch_adds);
  put("active.bytes_read", active_bytes_read);
  put("active.bytes_written", active_bytes_written);
  put("active.calls", active_calls);
  put("peer.calls_out", peer_calls_out);
  put("peer.calls_in", peer_calls_in);
  put("peer.refused", peer_refused);
  put("sync.flushes", sync_flushes);
  put("sync.ns", sync_ns);
  put("sync.errors", sync_errors);
  return out;
}

}  // namespace ardma
