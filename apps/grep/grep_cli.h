// ardma-grep's command line: parsing (GNU grep's options) and running a search, as a library the
// tests use; grep_main.cc is the thin main. The search runs on the server (grep.scan, one round
// trip per bounded batch); this side only formats the batches exactly as GNU grep formats its
// output.
#ifndef ARDMA_APPS_GREP_GREP_CLI_H_
#define ARDMA_APPS_GREP_GREP_CLI_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/grep/grep_format.h"
#include "core/cli/client_flags.h"

namespace ardma::grep {

// --help's text.
std::string Help();

// What the command line asks for; --server, --auth-file, TLS, --fs and --mode in DfsFlags.
struct Command : DfsFlags {
  Options options;
  bool line_numbers = false;
  int with_filename = -1;  // -1: by the number of files
  bool only_matching = false;
  bool suppress = false;
  bool recursive = false;
  bool dereference = false;  // -R: links met while recursing are followed too
  bool color = false;
  bool help = false;                  // --help: print Help(), exit 0
  bool version = false;  // --version: print the version line, exit 0
  bool quiet = false;                 // -q
  bool max_zero = false;              // -m 0: select nothing (GNU grep exits 1 at once)
  bool byte_offset = false;           // -b
  bool null_after_name = false;       // -Z: a NUL byte after each file name
  bool initial_tab = false;           // -T: a tab before each line's content, numbers aligned
  bool line_buffered = false;         // --line-buffered
  bool context_given = false;         // -A, -B or -C (even 0): groups are separated
  std::optional<std::string> group_separator = "--";  // nullopt: --no-group-separator
  // --include= and --exclude= in command-line order (true: --include), as GNU grep weighs them;
  // --exclude-dir=.
  std::vector<std::pair<bool, std::string>> name_filters;
  std::vector<std::string> exclude_dir;
  std::vector<std::string> warnings;  // GNU's warnings about the patterns
  std::vector<std::string> operands;  // dfs:/PATH files
};

// Parses argv as GNU grep does. A usage error is INVALID_ARGUMENT with grep's message.
absl::StatusOr<Command> ParseCommandLine(int argc, char** argv);

// Prints a usage error as GNU grep does (message, usage line, --help hint) to stderr; returns 2.
int UsageError(std::string_view message);

// Runs the search, printing to stdout and stderr; returns grep's exit status (0 a line was
// selected, 1 none, 2 an error).
int RunCommand(const Command& command);

}  // namespace ardma::grep

#endif  // ARDMA_APPS_GREP_GREP_CLI_H_
