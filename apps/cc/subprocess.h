// Running the compiler: with its output captured (the slave) or on this process's own standard
// streams (ardma-cc's local steps).
#ifndef ARDMA_APPS_CC_SUBPROCESS_H_
#define ARDMA_APPS_CC_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ardma::cc {

struct ProcessResult {
  int wait_status = 0;  // as waitpid reports it
  std::string out, err;
};

// Runs argv[0] (found on PATH) with `argv` in directory `cwd` (empty: this one), standard input
// /dev/null, standard output and error captured. NOT_FOUND if it cannot be started.
absl::StatusOr<ProcessResult> RunCaptured(const std::vector<std::string>& argv,
                                          const std::string& cwd);
// Runs it on this process's standard streams; returns its wait status.
absl::StatusOr<int> RunInherited(const std::vector<std::string>& argv);

// The exit code a shell would report for a wait status (128 + signal for a killed process).
int ExitCode(int wait_status);

}  // namespace ardma::cc

#endif  // ARDMA_APPS_CC_SUBPROCESS_H_
