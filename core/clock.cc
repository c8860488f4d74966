#include "core/clock.h"

#include <time.h>

#include <atomic>
#include <fstream>
#include <string>

namespace ardma::clock_internal {

TscScale tsc_scale;

namespace {

// How long the scale is measured over before the TSC is used.
constexpr int64_t kCalibrationNs = 50'000'000;

int64_t MonotonicNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

#if defined(__x86_64__)
// Whether the kernel keeps CLOCK_MONOTONIC from the TSC itself: then the counter runs at a constant
// rate through sleep states and frequency changes, and the CPUs' counters are in step (the
// kernel checks both before it chooses the TSC, and leaves it when they stop holding).
bool KernelTrustsTsc() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return std::getline(in, source) && source == "tsc";
}

struct Sample {
  uint64_t tsc;
  int64_t ns;
};

// A TSC and a CLOCK_MONOTONIC reading of one instant (the TSC read on both sides of it).
Sample Take() {
  const uint64_t before = __builtin_ia32_rdtsc();
  const int64_t ns = MonotonicNs();
  const uint64_t after = __builtin_ia32_rdtsc();
  return {before + (after - before) / 2, ns};
}

struct Calibration {
  bool usable = KernelTrustsTsc();
  Sample first = Take();
  std::atomic<bool> measuring{false};  // one thread sets the scale
};
#endif

}  // namespace

int64_t SteadyNowNsSlow() {
#if defined(__x86_64__)
  static Calibration calibration;
  const int64_t now_ns = MonotonicNs();
  if (calibration.usable && now_ns - calibration.first.ns >= kCalibrationNs &&
      !calibration.measuring.exchange(true, std::memory_order_acquire)) {
    const Sample now = Take();
    const uint64_t ticks = now.tsc - calibration.first.tsc;
    const int64_t ns = now.ns - calibration.first.ns;
    // A counter between 100 MHz and 10 GHz, or none: the clock stays on CLOCK_MONOTONIC.
    const uint64_t span = static_cast<uint64_t>(ns > 0 ? ns : 0);
    if (span > 0 && ticks > span / 10 && ticks < span * 10) {
      tsc_scale.base_tsc = now.tsc;
      tsc_scale.base_ns = now.ns;
      const uint64_t q32 =
          static_cast<uint64_t>((static_cast<unsigned __int128>(span) << 32) / ticks);
      tsc_scale.ns_per_tick_q32.store(q32, std::memory_order_release);
      return now.ns;
    }
  }
  return now_ns;
#else
  return MonotonicNs();
#endif
}

}  // namespace ardma::clock_internal
