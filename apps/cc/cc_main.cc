// ardma-cc: a drop-in compiler wrapper that compiles on the Active RDMA farm (cc_wrapper.h).
#include <iostream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "apps/cc/cc_wrapper.h"
#include "core/version.h"

namespace {

constexpr char kUsage[] =
    R"(Usage: ardma-cc COMPILER [ARGUMENT]...
  or:  ardma-cc -OPTION [ARGUMENT]...        (the compiler is cc)
Compile on the Active RDMA compile farm, as distcc does: make CC="ardma-cc gcc" CXX="ardma-cc g++".
As with distcc, ardma-cc's own options are --help and --version only: every other argument is the
compiler's, so an option nobody knows gets the compiler's message and exit status (cc's when the
first argument is an option: `ardma-cc --bogus` is `cc --bogus`).

A compile (-c) of one C, C++ or assembler file is preprocessed here into a tmpfs file that the
server maps as a region, compiled by a slave (ardma-ccd) that reads the source and writes the
object one-sidedly, and its diagnostics and exit status are the compiler's. Anything else (linking,
-E, -M, several inputs, stdin, machine-dependent options) runs here. If the farm fails (no server,
no slave in time, a slave that died, a compiler a slave does not allow) the compile runs here after
one warning line.

Environment:
  ARDMA_SERVER         the farm's ardmad (default 127.0.0.1:15712; ucx://HOST:PORT for one-sided
                       transfers); it must run on this machine with --register-dir ARDMA_CC_DIR
  ARDMA_CC_DIR         where sources and objects are staged (default /dev/shm/ardma-cc)
  ARDMA_CC_TIMEOUT     seconds a compile may take on the farm (default 300)
  ARDMA_CC_OBJECT_MAX  largest object a slave may send back (default 256M)
  ARDMA_CC_LOCAL       set: always compile here
  ARDMA_CC_VERBOSE     set: say where each compile ran
  ARDMA_CC_LOG         append one line per compile to this file
  ARDMA_AUTH_FILE      credentials, on a server with an auth file
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << "ardma-cc: no compiler given\nTry 'ardma-cc --help' for more information.\n";
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return 0;
  }
  if (args[0] == "--version") {
    std::cout << ardma::VersionLine("ardma-cc") << "\n";
    return 0;
  }
  if (args[0].size() > 1 && args[0][0] == '-') args.insert(args.begin(), "cc");  // as distcc
  // Abseil's lock-order graph costs a lookup on every Mutex::Lock (as in ardmad).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return ardma::cc::RunWrapper(args, ardma::cc::SettingsFromEnvironment());
}
