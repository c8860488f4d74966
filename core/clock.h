// The wall clock for the request paths, which read it on every call (a call's deadline, a wait's
// look at it): absl::Time as absl::Now() gives it, read through the C++ clock (clock_gettime in
// the vDSO). Debian's Abseil takes 132 cycles for absl::Now() on this project's machine against
// 56 for this (rdtsc around 2M calls of each, on the 2-core VM of docs/BENCHMARKS.md): a quarter
// of a UCX PING's client side. Elsewhere absl::Now() is as good.
#ifndef ARDMA_CORE_CLOCK_H_
#define ARDMA_CORE_CLOCK_H_

#include <chrono>

#include "absl/time/time.h"

namespace ardma {

inline absl::Time FastNow() {
  return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
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
