// The clocks of the request paths, which read them on every call.
//
// FastNow: the wall clock (a call's deadline, a wait's look at it), absl::Time as absl::Now()
// gives it, read through the C++ clock (clock_gettime in the vDSO). Debian's Abseil takes 132
// cycles for absl::Now() on this project's machine against 56 for this (rdtsc around 2M calls of
// each, on the 2-core VM of docs/BENCHMARKS.md). Elsewhere absl::Now() is as good.
//
// SteadyNowNs: the steady clock that stamps a request's arrival and times its run, two reads per
// request. Where the kernel keeps its own clock from the TSC (its clock source is "tsc": the
// counter is invariant and in step across CPUs), this is the TSC scaled to nanoseconds: an rdtsc
// and a multiply, where clock_gettime in the vDSO cost a PING's handler 42 ns of its 88 on this
// project's VM (docs/BENCHMARKS.md). The scale is measured against CLOCK_MONOTONIC over the
// process's first kCalibration of clock reads, which read CLOCK_MONOTONIC meanwhile; from then on
// the TSC counts on from the last CLOCK_MONOTONIC reading, so the clock does not step. It is not
// slewed with CLOCK_MONOTONIC afterwards: compare its readings with each other (and convert them
// with WallAt), not with another clock's. Readings on two CPUs can be a few ticks apart, so a
// duration between readings on two threads goes through ElapsedNs, which is never negative.
#ifndef ARDMA_CORE_CLOCK_H_
#define ARDMA_CORE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace ardma {

namespace clock_internal {
// The TSC's scale, once measured: ns = base_ns + ((tsc - base_tsc) * ns_per_tick_q32) >> 32.
struct TscScale {
  std::atomic<uint64_t> ns_per_tick_q32{0};  // 0: not measured yet, or no usable TSC
  uint64_t base_tsc = 0;                     // written before ns_per_tick_q32 (release)
  int64_t base_ns = 0;
};
extern TscScale tsc_scale;
// CLOCK_MONOTONIC, measuring the TSC's scale meanwhile.
int64_t SteadyNowNsSlow();
}  // namespace clock_internal

inline absl::Time FastNow() {
  return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
}

// The steady clock in nanoseconds: what a request's arrival is stamped with (see above).
inline int64_t SteadyNowNs() {
#if defined(__x86_64__)
  const clock_internal::TscScale& scale = clock_internal::tsc_scale;
  if (uint64_t q32 = scale.ns_per_tick_q32.load(std::memory_order_acquire); q32 != 0) {
    // (A CPU whose counter is a few ticks behind the one that took the base reads the base.)
    const int64_t ticks = static_cast<int64_t>(__builtin_ia32_rdtsc() - scale.base_tsc);
    const unsigned __int128 scaled =
        static_cast<unsigned __int128>(ticks > 0 ? ticks : 0) * q32;
    return scale.base_ns + static_cast<int64_t>(scaled >> 32);
  }
#endif
  return clock_internal::SteadyNowNsSlow();
}

// True once SteadyNowNs reads the TSC (on x86-64, where the kernel's clock source is "tsc").
inline bool SteadyClockOnTsc() {
  return clock_internal::tsc_scale.ns_per_tick_q32.load(std::memory_order_acquire) != 0;
}

// The time from steady reading `from` to `to`, 0 if `to` is earlier (two threads' readings).
inline uint64_t ElapsedNs(int64_t from, int64_t to) {
  return to > from ? static_cast<uint64_t>(to - from) : 0;
}
inline uint64_t ElapsedNs(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }

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
