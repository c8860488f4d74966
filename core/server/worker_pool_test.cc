#include "core/server/worker_pool.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

TEST(WorkerPoolTest, RunsJobsAndExpiresLateOnes) {
  WorkerPool pool(1, 16);
  absl::Notification release;
  std::atomic<int> ran{0}, expired{0};
  // Occupy the only worker, so the next job waits past its deadline.
  ASSERT_TRUE(pool.Submit({absl::InfiniteFuture(),
                           [&] {
                             release.WaitForNotification();
                             ++ran;
                           },
                           {}}));
  ASSERT_TRUE(
      pool.Submit({absl::Now() + absl::Milliseconds(1), [&] { ++ran; }, [&] { ++expired; }}));
  absl::SleepFor(absl::Milliseconds(20));
  release.Notify();
  pool.Stop();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(expired.load(), 1);
  EXPECT_EQ(pool.expired_count(), 1u);
}

TEST(WorkerPoolTest, FullQueueRefusesAndStopAnswersQueuedJobs) {
  WorkerPool pool(1, 1);
  absl::Notification release, started;
  std::atomic<int> expired{0};
  ASSERT_TRUE(pool.Submit({absl::InfiniteFuture(),
                           [&] {
                             started.Notify();
                             release.WaitForNotification();
                           },
                           {}}));
  started.WaitForNotification();
  ASSERT_TRUE(pool.Submit({absl::InfiniteFuture(), [] {}, [&] { ++expired; }}));
  EXPECT_FALSE(pool.Submit({absl::InfiniteFuture(), [] {}, {}}));  // queue of one is full
  std::thread stopper([&] { pool.Stop(); });
  absl::SleepFor(absl::Milliseconds(10));
  release.Notify();
  stopper.join();
  EXPECT_EQ(expired.load(), 1);
  EXPECT_FALSE(pool.Submit({absl::InfiniteFuture(), [] {}, {}}));
}

}  // namespace
}  // namespace ardma
