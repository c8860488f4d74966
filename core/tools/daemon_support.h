// What the mains of the project's daemons (ardmad, ardma-monitord, ardma-delay-proxy) share: the
// stop signals and the port file.
//
//   ardma::StopSignals stop;          // first, before any thread starts
//   ... start serving ...
//   ardma::WritePortFile(port_file, server->address());
//   int signal = stop.Wait();         // SIGINT or SIGTERM
#ifndef ARDMA_CORE_TOOLS_DAEMON_SUPPORT_H_
#define ARDMA_CORE_TOOLS_DAEMON_SUPPORT_H_

#include <signal.h>

#include <string>
#include <string_view>

namespace ardma {

// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it starts afterwards;
// Wait returns the first of them that arrives.
class StopSignals {
 public:
  StopSignals();
  int Wait();

 private:
  sigset_t set_;
};

// Writes "address\n" to `path` atomically (a temporary file renamed over it), so a reader never
// sees a partial address. Nothing if `path` is empty.
void WritePortFile(const std::string& path, std::string_view address);

}  // namespace ardma

#endif  // ARDMA_CORE_TOOLS_DAEMON_SUPPORT_H_
