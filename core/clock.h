// The wall clock for the request paths, which read it on every call (a call's deadline, a wait's
// look at it): absl::Time as absl::Now() gives it, read through the C++ clock (clock_gettime in
// the vDSO). Debian's Abseil takes 132 cycles for absl::Now() on this project's machine against
// 56 for this (rdtsc around 2M calls of each, on the 2-core VM of docs/BENCHMARKS.md): a quarter
// of a UCX PING's client side. Elsewhere absl::Now() is as good.
#ifndef ARDMA_CORE_CLOCK_H_
#define ARDMA_CORE_CLOCK_H_

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace ardma {

inline absl::Time FastNow() {
  return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
}

// The steady clock in nanoseconds: what a request's arrival is stamped with.
inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The wall clock at `steady_ns`, a steady-clock reading taken already (a request's arrival
// stamp), so that a deadline counted from it costs no further clock read: the reading plus the
// clocks' offset, which each thread reads again once 50 ms of steady time have passed since it
// last did (a step of the wall clock is followed within that). A stamp older than the offset's
// reading is converted with the newer offset.
inline absl::Time WallAt(int64_t steady_ns) {
  constexpr int64_t kRefresh = 50'000'000;
  struct Offset {
    int64_t read_at = 0;  // steady ns when the offset was read (0: never)
    int64_t wall_minus_steady = 0;
  };
  thread_local Offset offset;
  if (offset.read_at == 0 || steady_ns - offset.read_at > kRefresh) {
    const int64_t steady = SteadyNowNs();
    offset.wall_minus_steady = absl::ToUnixNanos(FastNow()) - steady;
    offset.read_at = steady;
  }
  return absl::FromUnixNanos(steady_ns + offset.wall_minus_steady);
}

// A deadline read from the clock only when something first waits for it: given as a time, it is
// that; given as a timeout, it counts from the first Get(). An operation that completes without
// waiting (a one-sided copy) reads no clock.
class LazyDeadline {
 public:
  explicit LazyDeadline(absl::Time deadline) : at_(deadline), known_(true) {}
  static LazyDeadline After(absl::Duration timeout) { return LazyDeadline(timeout); }
  absl::Time Get() {
    if (!known_) {
      at_ = FastNow() + timeout_;
      known_ = true;
    }
    return at_;
  }

 private:
  explicit LazyDeadline(absl::Duration timeout) : timeout_(timeout) {}
  absl::Time at_;
  absl::Duration timeout_;
  bool known_ = false;
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLOCK_H_
