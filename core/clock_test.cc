#include "core/clock.h"

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace ardma {
namespace {

// WallAt of a steady reading names the same instant as the wall clock read beside it, on a
// thread that has converted before and on one that never has.
TEST(ClockTest, WallAtConvertsASteadyReadingToTheWallClock) {
  auto check = [] {
    for (int i = 0; i < 3; ++i) {
      absl::Time before = FastNow();
      absl::Time at = WallAt(SteadyNowNs());
      absl::Time after = FastNow();
      // (The offset is read with two clock reads; allow what a preempted thread could take.)
      EXPECT_GE(at, before - absl::Milliseconds(100));
      EXPECT_LE(at, after + absl::Milliseconds(100));
    }
  };
  check();
  std::thread other(check);
  other.join();
}

// An older stamp converts to an earlier instant, by the difference of the stamps.
TEST(ClockTest, WallAtKeepsTheDistanceBetweenStamps) {
  int64_t now = SteadyNowNs();
  absl::Time a = WallAt(now);
  absl::Time b = WallAt(now - 1'000'000);
  EXPECT_EQ(a - b, absl::Milliseconds(1));
}

// Read back to back for longer than the calibration, on two threads at once, the steady clock
// never goes back on a thread, also when it changes from CLOCK_MONOTONIC to the TSC.
TEST(ClockTest, SteadyNowNeverGoesBackOnAThread) {
  auto run = [] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
    int64_t last = SteadyNowNs();
    uint64_t backwards = 0;
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < 1000; ++i) {
        int64_t now = SteadyNowNs();
        if (now < last) ++backwards;
        last = now;
      }
    }
    EXPECT_EQ(backwards, 0u);
  };
  std::thread other(run);
  run();
  other.join();
}

// It keeps time with CLOCK_MONOTONIC (std::chrono::steady_clock): over a stretch of either, the
// other measures the same length, within what a preempted thread between two reads can add.
TEST(ClockTest, SteadyNowKeepsTimeWithTheMonotonicClock) {
  auto monotonic = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  // Reads this clock (which is what calibrates it) until `done`, or until the monotonic clock
  // reads `deadline`.
  auto read_until = [&](auto done, int64_t deadline) {
    while (!done() && monotonic() < deadline) {
      (void)SteadyNowNs();
      std::this_thread::yield();
    }
  };
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  bool kernel_on_tsc = std::getline(source, name) && name == "tsc";
#if !defined(__x86_64__)
  kernel_on_tsc = false;
#endif
  const int64_t ours0 = SteadyNowNs(), theirs0 = monotonic();
  // Past the calibration: where the kernel keeps time with the TSC, so does this clock then.
  if (kernel_on_tsc) {
    read_until([] { return SteadyClockOnTsc(); }, theirs0 + 5'000'000'000);
    EXPECT_TRUE(SteadyClockOnTsc());
  }
  read_until([&] { return monotonic() - theirs0 >= 200'000'000; }, theirs0 + 5'000'000'000);
  const int64_t ours1 = SteadyNowNs(), theirs1 = monotonic();
  EXPECT_NEAR(static_cast<double>(ours1 - ours0), static_cast<double>(theirs1 - theirs0), 5e6);
  // And from here on: 100 ms more.
  read_until([&] { return monotonic() - theirs1 >= 100'000'000; }, theirs1 + 5'000'000'000);
  const int64_t ours2 = SteadyNowNs(), theirs2 = monotonic();
  EXPECT_NEAR(static_cast<double>(ours2 - ours1), static_cast<double>(theirs2 - theirs1), 5e6);
  EXPECT_NEAR(static_cast<double>(ours2), static_cast<double>(theirs2), 5e6);  // no step either
}

TEST(ClockTest, ElapsedIsNeverNegative) {
  EXPECT_EQ(ElapsedNs(int64_t{10}, int64_t{25}), 15u);
  EXPECT_EQ(ElapsedNs(int64_t{25}, int64_t{10}), 0u);
  EXPECT_EQ(ElapsedNs(uint64_t{25}, uint64_t{10}), 0u);
  EXPECT_EQ(ElapsedNs(uint64_t{10}, uint64_t{25}), 15u);
}

}  // namespace
}  // namespace ardma
