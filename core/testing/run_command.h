// Helpers for tests that run the project's binaries as a user would.
#ifndef ARDMA_CORE_TESTING_RUN_COMMAND_H_
#define ARDMA_CORE_TESTING_RUN_COMMAND_H_

#include <string>
#include <utility>
#include <vector>

namespace ardma::testing {

// Where the built binaries are: $ARDMA_BIN_DIR (ctest sets it), else build/bin.
std::string BinDir();

// Runs `command` with /bin/sh, captures its stdout and stderr (interleaved) into *output and
// returns its exit code (-1 if it did not exit normally).
int RunCommand(const std::string& command, std::string* output);

// The same with standard output and standard error kept apart (standard error is discarded when
// `err` is null).
int RunCommandSplit(const std::string& command, std::string* out, std::string* err = nullptr);

// Calls parse(argc, argv) with argv = `program` and `args` (argv[argc] null), as main would: for
// testing the command-line libraries the binaries are thin mains over.
template <typename Parse>
auto ParseArgv(std::string program, std::vector<std::string> args, Parse parse) {
  args.insert(args.begin(), std::move(program));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parse(static_cast<int>(args.size()), argv.data());
}

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_RUN_COMMAND_H_
