// A real tree of this machine that a golden test controls: a copy of its files and directories
// without the host's own symbolic links (which point wherever the installed packages put them),
// and links of every kind added on purpose.
#ifndef ARDMA_CORE_TESTING_REAL_TREE_H_
#define ARDMA_CORE_TESTING_REAL_TREE_H_

#include <string>

#include "absl/status/status.h"

namespace ardma::testing {

// Copies `from` to `to` (which must not exist) without its symbolic links, then AddLinks(to).
absl::Status CopyRealTree(const std::string& from, const std::string& to);

// Adds relative symbolic links under `dir` (which holds a subdirectory with a file in it): to a
// file ("link to file"), to a directory ("dirlink"), to that link ("link-to-link"), a dangling one
// ("dangling") and one back up the tree (SUBDIR/up -> "..": a loop for whoever follows links).
absl::Status AddLinks(const std::string& dir);

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_REAL_TREE_H_
