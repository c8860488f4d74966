// ardma-mount's command line as a library the tests use (mount_main.cc is the thin main):
// options, the mount options it takes from -o, and running the mount until it is unmounted.
#ifndef ARDMA_APPS_MOUNT_MOUNT_CLI_H_
#define ARDMA_APPS_MOUNT_MOUNT_CLI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/mount/dfs_fuse.h"
#include "core/cli/client_flags.h"

namespace ardma::mount {

// --help's text.
std::string Help();

// What the command line asks for; --server, --auth-file, TLS, --fs and --mode in DfsFlags.
struct Command : DfsFlags {
  MountOptions options;
  std::vector<std::string> fuse_options;  // -o options for FUSE itself (allow_other, ro, ...)
  bool foreground = false;                // -f
  bool debug = false;                     // -d: FUSE's request log (implies -f)
  int threads = 0;                        // --threads N: FUSE worker threads (0: libfuse's)
  std::string mountpoint;
  bool help = false, version = false;
};

// INVALID_ARGUMENT with the reason for bad usage.
absl::StatusOr<Command> ParseCommandLine(int argc, char** argv);

// Mounts and serves until unmounted (fusermount3 -u, umount, SIGINT, SIGTERM); returns the exit
// status (0 after a clean unmount).
int RunCommand(const Command& command);

}  // namespace ardma::mount

#endif  // ARDMA_APPS_MOUNT_MOUNT_CLI_H_
