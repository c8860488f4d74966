#include "core/clock.h"

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

}  // namespace
}  // namespace ardma
