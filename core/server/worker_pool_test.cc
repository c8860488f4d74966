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
  absl::SleepFor(absl::Milliseconds(20));  // under test: the queued job's deadline passes
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
  absl::SleepFor(absl::Milliseconds(10));  // under test: Stop answers while a job still runs
  release.Notify();
  stopper.join();
  EXPECT_EQ(expired.load(), 1);
  EXPECT_FALSE(pool.Submit({absl::InfiniteFuture(), [] {}, {}}));
}

// The Active RDMA paper's expiry, held: a queued job hears that its deadline passed when it passes,
// even while every worker is stuck in a run that does not end.
TEST(WorkerPoolTest, QueuedJobsExpireOnTimeWhileEveryWorkerIsStuck) {
  WorkerPool pool(1, 16);
  absl::Notification release, started, first_expired, second_expired;
  ASSERT_TRUE(pool.Submit({absl::InfiniteFuture(),
                           [&] {
                             started.Notify();
                             release.WaitForNotification();
                           },
                           {}}));
  started.WaitForNotification();
  std::atomic<int> ran{0};
  // Submitted later but due earlier: each is expired at its own deadline.
  ASSERT_TRUE(pool.Submit(
      {absl::Now() + absl::Milliseconds(200), [&] { ++ran; }, [&] { second_expired.Notify(); }}));
  ASSERT_TRUE(pool.Submit(
      {absl::Now() + absl::Milliseconds(20), [&] { ++ran; }, [&] { first_expired.Notify(); }}));
  EXPECT_TRUE(first_expired.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(second_expired.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(release.HasBeenNotified());  // the worker is still stuck
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_EQ(pool.expired_count(), 2u);
  release.Notify();
  pool.Stop();
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
}  // namespace ardma
