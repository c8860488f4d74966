// The "ctor_mark" active-code library, for the tests that shipped code stays out of an isolating
// server's process: its shared object's constructor creates the file $ARDMA_TEST_MARK_FILE, but
// only in a process whose parent's pid is $ARDMA_TEST_MARK_PARENT. A test that starts ardmad sets
// that to its own pid, so the file appears when the server process maps the library, not when a
// trial load or an isolated worker does (those are the server's children).
//   ctor_mark.echo bytes -> the same bytes
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "core/active/function_table.h"

namespace {

#ifdef ARDMA_ACTIVE_MODULE  // (only in the shipped object, not in the test binaries)
[[gnu::constructor]] void MarkTheServer() {
  const char* parent = std::getenv("ARDMA_TEST_MARK_PARENT");
  const char* file = std::getenv("ARDMA_TEST_MARK_FILE");
  if (parent == nullptr || file == nullptr || std::atol(parent) != ::getppid()) return;
  int fd = ::open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}
#endif

absl::StatusOr<std::string> Echo(ardma::Context&, std::string_view args) {
  return std::string(args);
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(ctor_mark, {"ctor_mark.echo", &Echo});
