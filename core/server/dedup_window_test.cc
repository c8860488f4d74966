#include "core/server/dedup_window.h"

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::ElementsAre;

class LogResponder : public Responder {
 public:
  explicit LogResponder(std::vector<std::string>* log) : log_(log) {}
  void Respond(absl::StatusOr<std::string> r) override {
    log_->push_back(r.ok() ? *r : std::string(absl::StatusCodeToString(r.status().code())));
  }
  bool Alive() const override { return true; }

 private:
  std::vector<std::string>* log_;
};

TEST(DedupWindowTest, RetryOfFinishedRequestReplaysResult) {
  DedupWindow window({});
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  EXPECT_EQ(window.Admit(1, 10, [&] { return r; }), DedupWindow::Admission::kRun);
  window.Finish(1, 10, std::string("result"));
  EXPECT_EQ(window.Admit(1, 10, [&] { return r; }), DedupWindow::Admission::kAnswered);
  // Another client:
  EXPECT_EQ(window.Admit(2, 10, [&] { return r; }), DedupWindow::Admission::kRun);
  EXPECT_THAT(log, ElementsAre("result"));
  EXPECT_EQ(window.replays(), 1u);
}

TEST(DedupWindowTest, RetryWhileRunningWaitsForTheOriginal) {
  DedupWindow window({});
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  EXPECT_EQ(window.Admit(1, 10, [&] { return r; }), DedupWindow::Admission::kRun);
  EXPECT_EQ(window.Admit(1, 10, [&] { return r; }), DedupWindow::Admission::kAttached);
  EXPECT_TRUE(log.empty());
  window.Finish(1, 10, absl::NotFoundError("x"));
  EXPECT_THAT(log, ElementsAre("NOT_FOUND"));
}

// Requests 1..`last` of `client`, each run (admitted first) and finished with `result`.
void RunInTurn(DedupWindow& window, uint64_t client, uint64_t last, const std::string& result) {
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  for (uint64_t id = 1; id <= last; ++id) {
    ASSERT_EQ(window.Admit(client, id, [&] { return r; }), DedupWindow::Admission::kRun);
    window.Finish(client, id, result);
  }
}

TEST(DedupWindowTest, EvictedRequestsAreRefusedNotRerun) {
  DedupWindow window({.max_entries_per_client = 2});
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  RunInTurn(window, 7, 3, "ok");
  EXPECT_EQ(window.size(), 2u);
  EXPECT_EQ(window.Admit(7, 1, [&] { return r; }), DedupWindow::Admission::kTooOld);
  EXPECT_THAT(log, ElementsAre("FAILED_PRECONDITION"));
  EXPECT_EQ(window.Admit(7, 3, [&] { return r; }), DedupWindow::Admission::kAnswered);
  // Another client's window is its own.
  EXPECT_EQ(window.Admit(8, 1, [&] { return r; }), DedupWindow::Admission::kRun);
}

TEST(DedupWindowTest, BoundedNumberOfClientsForgetsTheIdlest) {
  DedupWindow window({.max_clients = 2, .shards = 1});
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  for (uint64_t client : {1, 2}) {
    ASSERT_EQ(window.Admit(client, 1, [&] { return r; }), DedupWindow::Admission::kRun);
    window.Finish(client, 1, std::string("ok"));
  }
  // 2 is now the freshest; 3 makes the window forget client 1.
  EXPECT_EQ(window.Admit(2, 1, [&] { return r; }), DedupWindow::Admission::kAnswered);
  EXPECT_EQ(window.Admit(3, 1, [&] { return r; }), DedupWindow::Admission::kRun);
  EXPECT_EQ(window.Admit(2, 1, [&] { return r; }), DedupWindow::Admission::kAnswered);
  EXPECT_EQ(window.size(), 2u);
}

// In shards, each holds its share of the client limit (here 1 of 4): after 100 clients in turn,
// at most 4 windows are left (one per shard used), and the latest client's is one of them.
TEST(DedupWindowTest, ShardsSplitTheClientLimit) {
  DedupWindow window({.max_clients = 4, .shards = 4});
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  for (uint64_t client = 1; client <= 100; ++client) {
    ASSERT_EQ(window.Admit(client, 1, [&] { return r; }), DedupWindow::Admission::kRun);
    window.Finish(client, 1, std::string("ok"));
  }
  EXPECT_LE(window.size(), 4u);
  EXPECT_GE(window.size(), 2u);  // (the clients are spread, not all in one shard)
  EXPECT_EQ(window.Admit(100, 1, [&] { return r; }), DedupWindow::Admission::kAnswered);
  EXPECT_THAT(log, ElementsAre("ok"));
}

// The bytes of results are bounded over the whole window, not per shard: one client alone may
// use all of them (here 10 results of 10 bytes), and the oldest go first past that.
TEST(DedupWindowTest, TheResultBytesBoundIsTheWholeWindows) {
  DedupWindow window({.max_result_bytes = 100, .shards = 16});
  std::vector<std::string> log;
  auto r = std::make_shared<LogResponder>(&log);
  RunInTurn(window, 1, 20, "0123456789");
  EXPECT_EQ(window.size(), 10u);
  EXPECT_EQ(window.Admit(1, 11, [&] { return r; }), DedupWindow::Admission::kAnswered);
  EXPECT_EQ(window.Admit(1, 10, [&] { return r; }), DedupWindow::Admission::kTooOld);
}

// Many threads at once, their clients sharing shards: every request runs once, every retry is
// answered, and the window holds each client's last `max_entries_per_client` results.
TEST(DedupWindowTest, ConcurrentClientsInSharedShardsAreEachAnsweredOnce) {
  constexpr int kThreads = 4, kClientsPerThread = 8, kRequests = 2000;
  DedupWindow window({.max_entries_per_client = 100, .shards = 4});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> log;
      auto r = std::make_shared<LogResponder>(&log);
      for (uint64_t id = 1; id <= kRequests; ++id) {
        for (int c = 0; c < kClientsPerThread; ++c) {
          uint64_t client = static_cast<uint64_t>(t * kClientsPerThread + c + 1);
          if (window.Admit(client, id, [&] { return r; }) != DedupWindow::Admission::kRun) {
            ++wrong;
          }
          window.Finish(client, id, std::to_string(id));
          if (window.Admit(client, id, [&] { return r; }) != DedupWindow::Admission::kAnswered) {
            ++wrong;
          }
        }
      }
      if (log.size() != static_cast<size_t>(kRequests * kClientsPerThread)) ++wrong;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(window.size(), static_cast<size_t>(kThreads * kClientsPerThread * 100));
  EXPECT_EQ(window.replays(), static_cast<uint64_t>(kThreads * kClientsPerThread * kRequests));
}

}  // namespace
}  // namespace ardma
