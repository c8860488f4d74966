// ardma-cp: cp between the local file system and an ardmad's file system (cp_cli.h).
#include <iostream>

#include "apps/cp/cp_cli.h"
#include "core/version.h"

int main(int argc, char** argv) {
  absl::StatusOr<ardma::cp::Command> command = ardma::cp::ParseCommandLine(argc, argv);
  if (!command.ok()) {
    std::cerr << "ardma-cp: " << command.status().message() << "\n"
              << "Try 'ardma-cp --help' for more information.\n";
    return 1;
  }
  if (command->help) {
    std::cout << ardma::cp::Help();
    return 0;
  }
  if (command->version) {
    std::cout << ardma::VersionLine("ardma-cp") << "\n";
    return 0;
  }
  return ardma::cp::RunCommand(*command);
}
