// ardma-mount: the DFS as a FUSE file system (mount_cli.h).
#include <iostream>
#include <string>

#include "apps/mount/mount_cli.h"
#include "core/version.h"

int main(int argc, char** argv) {
  absl::StatusOr<ardma::mount::Command> command = ardma::mount::ParseCommandLine(argc, argv);
  if (!command.ok()) {
    std::cerr << "ardma-mount: " << command.status().message()
              << "\nTry 'ardma-mount --help' for more information.\n";
    return 2;
  }
  if (command->help) {
    std::cout << ardma::mount::Help();
    return 0;
  }
  if (command->version) {
    std::cout << ardma::VersionLine("ardma-mount") << "\n";
    return 0;
  }
  return ardma::mount::RunCommand(*command);
}
