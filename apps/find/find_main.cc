// ardma-find: GNU find for an ardmad's file system (find_cli.h).
#include <iostream>

#include "apps/find/find_cli.h"
#include "core/version.h"

int main(int argc, char** argv) {
  absl::StatusOr<ardma::find::Command> command = ardma::find::ParseCommandLine(argc, argv);
  if (!command.ok()) {
    std::cerr << "ardma-find: " << command.status().message() << "\n";
    return 1;
  }
  if (command->help) {
    std::cout << ardma::find::Help();
    return 0;
  }
  if (command->version) {
    std::cout << ardma::VersionLine("ardma-find") << "\n";
    return 0;
  }
  return ardma::find::RunCommand(*command);
}
