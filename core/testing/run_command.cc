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

namespace {

// A fresh temporary file's path ("" if none could be made).
std::string TempFile() {
  std::string path = (std::filesystem::temp_directory_path() / "ardma_cmd_XXXXXX").string();
  int fd = ::mkstemp(path.data());
  if (fd < 0) return "";
  ::close(fd);
  return path;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  return ss.str();
}

int Run(const std::string& command, std::string* out, std::string* err, bool merge) {
  std::string out_path = TempFile(), err_path = err != nullptr ? TempFile() : "/dev/null";
  if (out_path.empty() || err_path.empty()) {
    *out = "mkstemp failed";
    return -1;
  }
  std::string redirect = merge ? ") > " + out_path + " 2>&1"
                               : " 2>" + err_path + ") > " + out_path;
  int status = std::system(("(" + command + redirect).c_str());
  *out = Slurp(out_path);
  if (err != nullptr) *err = Slurp(err_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int RunCommand(const std::string& command, std::string* output) {
  return Run(command, output, nullptr, /*merge=*/true);
}

int RunCommandSplit(const std::string& command, std::string* out, std::string* err) {
  return Run(command, out, err, /*merge=*/false);
}

}  // namespace ardma::testing
