// ardma-cc: the compiler wrapper (docs/cc.md). `ardma-cc gcc ARGS...` compiles through the farm
// when distcc's rules allow (cc_args.h) and locally otherwise; any failure of the farm falls back
// to a local compile with one warning line.
#ifndef ARDMA_APPS_CC_CC_WRAPPER_H_
#define ARDMA_APPS_CC_CC_WRAPPER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ardma::cc {

// From the environment (docs/cc.md).
struct WrapperSettings {
  std::string server = "127.0.0.1:15712";       // $ARDMA_SERVER
  std::string dir = "/dev/shm/ardma-cc";        // $ARDMA_CC_DIR: the server's --register-dir
  absl::Duration timeout = absl::Seconds(300);  // $ARDMA_CC_TIMEOUT (seconds): a job's limit
  uint64_t object_capacity = 256ull << 20;      // $ARDMA_CC_OBJECT_MAX: largest object
  bool verbose = false;                         // $ARDMA_CC_VERBOSE=1
  bool local = false;                           // $ARDMA_CC_LOCAL=1: never the farm
  std::string log;  // $ARDMA_CC_LOG: append one line per compile (where it ran, bytes)
};
WrapperSettings SettingsFromEnvironment();

// Runs the compile `args` (the compiler first); returns the exit code to exit with.
int RunWrapper(const std::vector<std::string>& args, const WrapperSettings& settings);

}  // namespace ardma::cc

#endif  // ARDMA_APPS_CC_CC_WRAPPER_H_
