// The "hostile_ctor" active-code library: its shared object's constructor makes a socket as the
// library is loaded, before any function is called (tests of the sandboxed trial load).
//   hostile_ctor.noop ()  -> ""
#include <sys/socket.h>
#include <unistd.h>

#include "core/active/function_table.h"

namespace {

#ifdef ARDMA_ACTIVE_MODULE  // (only in the shipped object, not in the test binaries)
[[gnu::constructor]] void MakeASocket() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) ::close(fd);
}
#endif

absl::StatusOr<std::string> Noop(ardma::Context&, std::string_view) { return std::string(); }

}  // namespace

ARDMA_ACTIVE_LIBRARY(hostile_ctor, {"hostile_ctor.noop", &Noop});
