// ardma-cp's command line as a library the tests use (cp_main.cc is the thin main): cp(1)'s
// options and operands, and the copies — DFS to DFS on the server in one request (a file, or a
// whole tree with -r), uploads as pipelined writes from an mmap'd source, downloads as pipelined
// reads.
#ifndef ARDMA_APPS_CP_CP_CLI_H_
#define ARDMA_APPS_CP_CP_CLI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/cp/copier.h"
#include "core/cli/client_flags.h"

namespace ardma::cp {

// --help's text.
std::string Help();

// What the command line asks for; --server, --auth-file, TLS, --fs and --mode (rdma: the DFS code
// runs here over one-sided operations) in DfsFlags.
struct Command : DfsFlags {
  Options options;
  std::string target_directory;       // -t DIR
  bool no_target_directory = false;   // -T
  bool parents = false;               // --parents: DIRECTORY/SOURCE
  bool help = false;                  // --help: print Help(), exit 0
  bool version = false;  // --version: print the version line, exit 0
  std::vector<std::string> operands;  // SOURCE... DEST (at least two)
};

// Parses cp(1)-style options. INVALID_ARGUMENT with cp's message for bad usage.
absl::StatusOr<Command> ParseCommandLine(int argc, char** argv);

// Copies every source to the destination, reporting to stdout (-v) and stderr; returns cp's exit
// status (0 everything copied, 1 anything failed — the rest is still copied).
int RunCommand(const Command& command);

}  // namespace ardma::cp

#endif  // ARDMA_APPS_CP_CP_CLI_H_
