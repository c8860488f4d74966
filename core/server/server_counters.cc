#include "core/server/server_counters.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ardma {

namespace {

// Stat's names, in its order.
constexpr std::array<const char*, static_cast<size_t>(Stat::kCount)> kStatNames = {
    "bytes_in",
    "bytes_out",
    "errors",
    "connections.accepted",
    "connections.open",
    "connections.protocol_errors",
    "ucx.held",
    "ucx.overruns",
    "auth.ok",
    "auth.refused",
    "auth.permission_denied",
    "execute.ns",
    "execute.inline",
    "execute.pooled",
    "execute.expired",
    "execute.rejected",
    "execute.rescheduled",
    "parked.total",
    "execute.resumed",
    "close_hooks.run",
    "active.reads",
    "active.writes",
    "active.cas",
    "active.fetch_adds",
    "active.bytes_read",
    "active.bytes_written",
    "active.calls",
    "peer.calls_out",
    "peer.calls_in",
    "peer.refused",
    "replication.writes",
    "replication.failures",
    "replica.applied",
    "replica.refused",
    "sync.flushes",
    "sync.ns",
    "sync.errors",
};

std::atomic<uint64_t> next_id{1};

}  // namespace

void LatencyHistogram::Record(uint64_t ns) {
  double seconds = static_cast<double>(ns) * 1e-9;
  size_t b = 0;
  while (b < kLatencyBounds.size() && seconds > kLatencyBounds[b]) ++b;
  buckets[b] += 1;
  sum_ns += ns;
  count += 1;
}

std::array<uint64_t, kLatencyBounds.size()> LatencyTotals::Cumulative() const {
  std::array<uint64_t, kLatencyBounds.size()> out{};
  uint64_t running = 0;
  for (size_t b = 0; b < kLatencyBounds.size(); ++b) {
    running += buckets[b];
    out[b] = running;
  }
  return out;
}

ServerCounters::ServerCounters() : id_(next_id.fetch_add(1, std::memory_order_relaxed)) {}

ServerCounters::~ServerCounters() = default;

ServerCounters::Set& ServerCounters::MineSlow() {
  Set* set;
  {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Set>& mine = sets_[std::this_thread::get_id()];
    if (mine == nullptr) mine = std::make_unique<Set>();
    set = mine.get();
  }
  server_counters_internal::cached = {id_, set};
  return *set;
}

template <typename F>
void ServerCounters::ForEachSet(F f) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [thread, set] : sets_) f(*set);
}

void ServerCounters::AddActive(const ActiveOpCounts& c) {
  if ((c.reads | c.writes | c.cas | c.fetch_adds | c.bytes_read | c.bytes_written | c.calls |
       c.peer_calls) == 0) {
    return;  // (most calls of short functions)
  }
  std::array<Count, static_cast<size_t>(Stat::kCount)>& stats = Mine().stats;
  auto add = [&stats](Stat stat, uint64_t n) { stats[static_cast<size_t>(stat)] += n; };
  add(Stat::kActiveReads, c.reads);
  add(Stat::kActiveWrites, c.writes);
  add(Stat::kActiveCas, c.cas);
  add(Stat::kActiveFetchAdds, c.fetch_adds);
  add(Stat::kActiveBytesRead, c.bytes_read);
  add(Stat::kActiveBytesWritten, c.bytes_written);
  add(Stat::kActiveCalls, c.calls);
  add(Stat::kPeerCallsOut, c.peer_calls);
}

uint64_t ServerCounters::Get(Stat stat) const {
  uint64_t sum = 0;
  ForEachSet([&](const Set& set) { sum += set.stats[static_cast<size_t>(stat)].value(); });
  return sum;
}

uint64_t ServerCounters::Requests(uint8_t op) const {
  uint64_t sum = 0;
  ForEachSet([&](const Set& set) { sum += set.requests[op].value(); });
  return sum;
}

LatencyTotals ServerCounters::Latencies(uint8_t op) const {
  LatencyTotals totals;
  ForEachSet([&](const Set& set) {
    const LatencyHistogram& h = set.latency[op];
    for (size_t b = 0; b < totals.buckets.size(); ++b) totals.buckets[b] += h.buckets[b].value();
    totals.sum_ns += h.sum_ns.value();
    totals.count += h.count.value();
  });
  return totals;
}

std::vector<wire::StatsEntry> ServerCounters::Snapshot() const {
  std::array<uint64_t, wire::kNumOps> requests{};
  std::array<uint64_t, static_cast<size_t>(Stat::kCount)> stats{};
  ForEachSet([&](const Set& set) {
    for (size_t op = 0; op < requests.size(); ++op) requests[op] += set.requests[op].value();
    for (size_t i = 0; i < stats.size(); ++i) stats[i] += set.stats[i].value();
  });
  std::vector<wire::StatsEntry> out;
  for (int op = 1; op < wire::kNumOps; ++op) {
    out.emplace_back(
        absl::StrCat("requests.", absl::AsciiStrToLower(wire::OpName(static_cast<wire::Op>(op)))),
        requests[op]);
  }
  for (size_t i = 0; i < stats.size(); ++i) {
    out.emplace_back(kStatNames[i], stats[i]);
    if (static_cast<Stat>(i) == Stat::kConnectionsOpen) {
      out.emplace_back("connections.queued_bytes", queued_bytes.load(std::memory_order_relaxed));
    }
  }
  return out;
}

}  // namespace ardma
