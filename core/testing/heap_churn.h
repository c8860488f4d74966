// The heap issue's churn workload, for the tests and the benchmark that run it: threads (or
// clients) allocate random sizes, log-uniform from 16 B up to a maximum, and free at random, until
// 20 times the region has gone through, never holding more than 60% of it live between them.
#ifndef ARDMA_CORE_TESTING_HEAP_CHURN_H_
#define ARDMA_CORE_TESTING_HEAP_CHURN_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/context/context.h"

namespace ardma::testing {

// Shared by every worker of one run.
struct ChurnShared {
  std::atomic<uint64_t> live{0};
  std::atomic<uint64_t> churned{0};
  std::atomic<uint64_t> failures{0};  // allocations and frees that failed
  absl::Mutex mu;
  std::string first_failure ABSL_GUARDED_BY(mu);

  std::string FirstFailure() {
    absl::MutexLock lock(&mu);
    return first_failure;
  }
};

struct ChurnOptions {
  uint64_t region = 0;    // the heap's size: the 60% and 20x are of it
  uint64_t max_size = 0;  // the largest allocation
  uint64_t seed = 0;      // per worker
  bool free_at_end = true;  // false: return what is still held (to measure it live)
};

// One worker's share, on `ctx`. Returns the blocks it still holds (none if free_at_end).
std::vector<uint64_t> ChurnWorker(Context& ctx, const ChurnOptions& options, ChurnShared& shared);

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_HEAP_CHURN_H_
