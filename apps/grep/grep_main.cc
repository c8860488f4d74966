// ardma-grep: GNU grep for files in an ardmad's file system (grep_cli.h).
#include <iostream>
#include <string>

#include "apps/grep/grep_cli.h"
#include "core/version.h"

int main(int argc, char** argv) {
  absl::StatusOr<ardma::grep::Command> command = ardma::grep::ParseCommandLine(argc, argv);
  if (absl::IsNotFound(command.status())) {  // -f FILE that cannot be read: not a usage error
    std::cerr << "ardma-grep: " << command.status().message() << "\n";
    return 2;
  }
  if (!command.ok()) return ardma::grep::UsageError(std::string(command.status().message()));
  if (command->help) {
    std::cout << ardma::grep::Help();
    return 0;
  }
  if (command->version) {
    std::cout << ardma::VersionLine("ardma-grep") << "\n";
    return 0;
  }
  return ardma::grep::RunCommand(*command);
}
