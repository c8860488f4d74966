// A local directory tree as text, for comparing what a tool made with what GNU's tool made: one
// line per entry below the root, sorted by path — type, permission bits, and a file's size and
// content hash or a link's target; optionally modification times (not of links).
#ifndef ARDMA_CORE_TESTING_TREE_SNAPSHOT_H_
#define ARDMA_CORE_TESTING_TREE_SNAPSHOT_H_

#include <string>

namespace ardma::testing {

struct SnapshotOptions {
  bool mtimes = false;  // also each file's and directory's modification time (ns)
  bool root = true;     // a line for the root itself
};

// The snapshot of `root`, or "error: ..." if it cannot be read.
std::string TreeSnapshot(const std::string& root, SnapshotOptions options = {});

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_TREE_SNAPSHOT_H_
