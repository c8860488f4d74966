#include "core/server/server_counters.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ardma {
namespace {

uint64_t Named(const ServerCounters& counters, std::string_view name) {
  for (const auto& [n, v] : counters.Snapshot()) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(ServerCountersTest, EveryThreadsCountsAreSummed) {
  ServerCounters counters;
  constexpr int kThreads = 4, kEach = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&counters] {
      for (int i = 0; i < kEach; ++i) {
        counters.Add(Stat::kBytesIn, 3);
        counters.AddRequest(static_cast<uint8_t>(wire::Op::kRead));
        counters.Latency(static_cast<uint8_t>(wire::Op::kRead)).Record(1500);  // 1.5 us
      }
    });
  }
  // Read while they count: never more than the total.
  while (counters.Get(Stat::kBytesIn) < uint64_t{3} * kThreads * kEach) {
    ASSERT_LE(counters.Requests(static_cast<uint8_t>(wire::Op::kRead)),
              uint64_t{kThreads} * kEach);
    std::this_thread::yield();
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counters.Get(Stat::kBytesIn), uint64_t{3} * kThreads * kEach);
  EXPECT_EQ(Named(counters, "bytes_in"), uint64_t{3} * kThreads * kEach);
  EXPECT_EQ(counters.Requests(static_cast<uint8_t>(wire::Op::kRead)), uint64_t{kThreads} * kEach);
  EXPECT_EQ(Named(counters, "requests.read"), uint64_t{kThreads} * kEach);
  LatencyTotals read = counters.Latencies(static_cast<uint8_t>(wire::Op::kRead));
  EXPECT_EQ(read.count, uint64_t{kThreads} * kEach);
  EXPECT_EQ(read.sum_ns, uint64_t{1500} * kThreads * kEach);
  std::array<uint64_t, kLatencyBounds.size()> cumulative = read.Cumulative();
  EXPECT_EQ(cumulative[0], 0u);                              // <= 1 us
  EXPECT_EQ(cumulative[1], uint64_t{kThreads} * kEach);      // <= 2.5 us
  EXPECT_EQ(cumulative.back(), uint64_t{kThreads} * kEach);  // <= 10 s
}

TEST(ServerCountersTest, ALevelMayGoDownOnAnotherThread) {
  ServerCounters counters;
  std::thread([&counters] { counters.Add(Stat::kConnectionsOpen, 3); }).join();
  EXPECT_EQ(counters.Get(Stat::kConnectionsOpen), 3u);
  counters.Subtract(Stat::kConnectionsOpen, 2);  // closed elsewhere
  EXPECT_EQ(counters.Get(Stat::kConnectionsOpen), 1u);
  EXPECT_EQ(Named(counters, "connections.open"), 1u);
}

TEST(ServerCountersTest, TwoCountersOnOneThreadStayApart) {
  auto a = std::make_unique<ServerCounters>();
  ServerCounters b;
  for (int i = 0; i < 10; ++i) {
    a->Add(Stat::kErrors, 1);
    b.Add(Stat::kErrors, 2);
  }
  EXPECT_EQ(a->Get(Stat::kErrors), 10u);
  EXPECT_EQ(b.Get(Stat::kErrors), 20u);
  // A new set of counters, perhaps where `a` was, starts from nothing on this thread.
  a.reset();
  a = std::make_unique<ServerCounters>();
  a->Add(Stat::kErrors, 1);
  EXPECT_EQ(a->Get(Stat::kErrors), 1u);
  EXPECT_EQ(b.Get(Stat::kErrors), 20u);
}

TEST(ServerCountersTest, ActiveCountsAndQueuedBytesAreInTheSnapshot) {
  ServerCounters counters;
  counters.AddActive({.reads = 2, .bytes_read = 16, .peer_calls = 1});
  counters.AddActive({});  // nothing
  counters.queued_bytes.fetch_add(7);
  EXPECT_EQ(Named(counters, "active.reads"), 2u);
  EXPECT_EQ(Named(counters, "active.bytes_read"), 16u);
  EXPECT_EQ(Named(counters, "peer.calls_out"), 1u);
  EXPECT_EQ(Named(counters, "connections.queued_bytes"), 7u);
}

}  // namespace
}  // namespace ardma
