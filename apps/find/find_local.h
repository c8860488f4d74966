// ardma-find's walk on the client, for expressions the server cannot evaluate: -exec, -execdir,
// -ok and -delete (run here, with DFS paths, as find over NFS would run them) and -depth's
// post-order. The walk's entries come a page at a time (dfs.find); the expression is the same.
#ifndef ARDMA_APPS_FIND_FIND_LOCAL_H_
#define ARDMA_APPS_FIND_FIND_LOCAL_H_

#include <string>

#include "absl/time/time.h"
#include "apps/find/find_cli.h"
#include "services/dfs/dfs_client.h"

namespace ardma::find {

// Walks `root` (DFS path; `display` as printed), printing what actions print. A link at `root`
// is walked through with `follow_start` (-H), every link met with `follow_all` (-L: a directory
// met again below itself is find's "File system loop detected", not entered). Returns 0, or 1
// if anything failed (reported on stderr).
int WalkHere(dfs::DfsClient& fs, const Expression& expr, const std::string& root,
             const std::string& display, absl::Time now, bool follow_start = false,
             bool follow_all = false);

}  // namespace ardma::find

#endif  // ARDMA_APPS_FIND_FIND_LOCAL_H_
