#include "core/testing/run_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ardma::testing {

std::string BinDir() {
  const char* dir = std::getenv("ARDMA_BIN_DIR");
  return dir != nullptr ? dir : "build/bin";
}

int RunCommand(const std::string& command, std::string* output) {
  std::string path = (std::filesystem::temp_directory_path() / "ardma_cmd_XXXXXX").string();
  int fd = ::mkstemp(path.data());
  if (fd < 0) {
    *output = "mkstemp failed";
    return -1;
  }
  ::close(fd);
  int status = std::system((command + " > " + path + " 2>&1").c_str());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  *output = ss.str();
  std::filesystem::remove(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace ardma::testing
