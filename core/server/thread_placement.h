// Where ardmad's I/O threads run (--nic-cpu, --realtime): standing in for a NIC's own processor.
#ifndef ARDMA_CORE_SERVER_THREAD_PLACEMENT_H_
#define ARDMA_CORE_SERVER_THREAD_PLACEMENT_H_

#include <vector>

#include "absl/status/status.h"

namespace ardma {

// Pins the calling thread to `cpu`.
absl::Status PinToCpu(int cpu);
// Runs the calling thread under SCHED_FIFO.
absl::Status MakeRealtime();
// Tries the placement on a throw-away thread, so a bad --nic-cpu or --realtime fails the start with
// a clear error instead of leaving I/O threads where they were.
absl::Status CheckPlacement(const std::vector<int>& cpus, bool realtime);

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_THREAD_PLACEMENT_H_
