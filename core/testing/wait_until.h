// WaitUntil: how a test waits for something another thread or process does — it polls a
// predicate until it holds or a deadline passes, never a bare sleep that hopes long enough.
//
//   ASSERT_TRUE(testing::WaitUntil([&] { return Parked() == 4; })) << "never parked";
#ifndef ARDMA_CORE_TESTING_WAIT_UNTIL_H_
#define ARDMA_CORE_TESTING_WAIT_UNTIL_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ardma::testing {

// Polls `predicate` every `interval` until it returns true (then true) or `timeout` passes (then
// its last answer, false).
template <typename Predicate>
bool WaitUntil(Predicate&& predicate, absl::Duration timeout = absl::Seconds(20),
               absl::Duration interval = absl::Milliseconds(2)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!predicate()) {
    if (absl::Now() >= deadline) return predicate();
    absl::SleepFor(interval);
  }
  return true;
}

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_WAIT_UNTIL_H_
