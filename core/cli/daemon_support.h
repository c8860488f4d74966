// What the mains of the project's long-running programs (ardmad, ardma-monitord, ardma-monitor,
// ardma-delay-proxy) share: the stop signals and the port file.
//
//   ardma::StopSignals stop;          // first, before any thread starts
//   ... start serving ...
//   ardma::WritePortFile(port_file, server->address());
//   int signal = stop.Wait();         // SIGINT or SIGTERM
#ifndef ARDMA_CORE_CLI_DAEMON_SUPPORT_H_
#define ARDMA_CORE_CLI_DAEMON_SUPPORT_H_

#include <signal.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace ardma {

// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it starts afterwards;
// Wait returns the first of them that arrives; WaitFor gives up after `timeout` (nullopt).
class StopSignals {
 public:
  StopSignals();
  int Wait();
  std::optional<int> WaitFor(absl::Duration timeout);

 private:
  sigset_t set_;
};

// Writes "address\n" to `path` atomically (a temporary file renamed over it), so a reader never
// sees a partial address. Nothing if `path` is empty.
void WritePortFile(const std::string& path, std::string_view address);

}  // namespace ardma

#endif  // ARDMA_CORE_CLI_DAEMON_SUPPORT_H_
