// ardma-find's command line as a library the tests use (find_main.cc is the thin main): parsing
// the options, starting points and GNU find expression, and running the walk on the server (one
// round trip per batch of matches).
#ifndef ARDMA_APPS_FIND_FIND_CLI_H_
#define ARDMA_APPS_FIND_FIND_CLI_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/find/find_format.h"
#include "core/cli/client_flags.h"
#include "services/dfs/dfs_client.h"

namespace ardma::find {

// --help's text.
std::string Help();

// What the command line asks for; --server, --auth-file, TLS, --fs and --mode in DfsFlags.
struct Command : DfsFlags {
  bool help = false;                    // --help: print Help(), exit 0
  bool version = false;  // --version: print the version line, exit 0
  char links = 'P';                     // -P, -H or -L: which symbolic links are followed
  std::vector<std::string> roots;       // dfs:/PATH starting points
  std::vector<std::string> expression;  // the tokens after them
};

// Parses the options and starting points. INVALID_ARGUMENT with find's message for bad usage.
absl::StatusOr<Command> ParseCommandLine(int argc, char** argv);

// A parsed expression and the options found in it.
struct Expression {
  std::unique_ptr<Expr> expr;
  bool has_action = false;  // -print or -print0 given (else matches are printed)
  uint32_t min_depth = 0, max_depth = UINT32_MAX;
  bool depth_first = false;  // -depth, -delete
  bool follow = false;       // -follow (as -L)
};
// Parses a GNU find expression; -newer looks its file up through `fs` (null: the syntax is
// checked and -newer's time left unset).
absl::StatusOr<Expression> ParseExpression(std::vector<std::string> tokens, dfs::DfsClient* fs);

// Walks every starting point, printing matches to stdout and errors to stderr; returns find's
// exit status (0 all walked, 1 any error).
int RunCommand(const Command& command);

}  // namespace ardma::find

#endif  // ARDMA_APPS_FIND_FIND_CLI_H_
