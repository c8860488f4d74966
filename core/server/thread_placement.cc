#include "core/server/thread_placement.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

constexpr int kRealtimePriority = 10;

}  // namespace

absl::Status PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int err = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set);
  if (err != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot pin an I/O thread to CPU ", cpu, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status MakeRealtime() {
  sched_param param{};
  param.sched_priority = kRealtimePriority;
  int err = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &param);
  if (err != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot run I/O threads under SCHED_FIFO (--realtime needs root or CAP_SYS_NICE, and a "
        "real-time budget where cgroups limit it): ",
        std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status CheckPlacement(const std::vector<int>& cpus, bool realtime) {
  if (cpus.empty() && !realtime) return absl::OkStatus();
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("no CPU ", cpu));
    }
  }
  absl::Status status;
  std::thread probe([&] {
    for (int cpu : cpus) {
      status.Update(PinToCpu(cpu));
    }
    if (realtime) status.Update(MakeRealtime());
  });
  probe.join();
  return status;
}

}  // namespace ardma
