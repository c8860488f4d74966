// Helpers for tests that run the project's binaries as a user would.
#ifndef ARDMA_CORE_TESTING_RUN_COMMAND_H_
#define ARDMA_CORE_TESTING_RUN_COMMAND_H_

#include <string>

namespace ardma::testing {

// Where the built binaries are: $ARDMA_BIN_DIR (ctest sets it), else build/bin.
std::string BinDir();

// Runs `command` with /bin/sh, captures its stdout and stderr (interleaved) into *output and
// returns its exit code (-1 if it did not exit normally).
int RunCommand(const std::string& command, std::string* output);

// The same with standard output and standard error kept apart (standard error is discarded when
// `err` is null).
int RunCommandSplit(const std::string& command, std::string* out, std::string* err = nullptr);

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_RUN_COMMAND_H_
