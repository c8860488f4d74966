#include "core/cli/daemon_support.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace ardma {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::Wait() {
  int signal = 0;
  sigwait(&set_, &signal);
  return signal;
}

std::optional<int> StopSignals::WaitFor(absl::Duration timeout) {
  timespec wait = absl::ToTimespec(timeout);
  int signal = sigtimedwait(&set_, nullptr, &wait);
  if (signal <= 0) return std::nullopt;
  return signal;
}

void WritePortFile(const std::string& path, std::string_view address) {
  if (path.empty()) return;
  // A fresh, unpredictable temporary name beside it (mkstemp: created O_EXCL, mode 0600), then an
  // atomic rename, so a reader never sees half a line and nobody can plant the temporary file.
  std::string tmp = path + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    ARDMA_LOG(kError, "cannot write the port file %s: %s", path, std::strerror(errno));
    return;
  }
  std::string line = std::string(address) + "\n";
  bool ok = ::fchmod(fd, 0644) == 0 && ::write(fd, line.data(), line.size()) ==
                                             static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ARDMA_LOG(kError, "cannot write the port file %s: %s", path, std::strerror(errno));
    ::unlink(tmp.c_str());
  }
}

}  // namespace ardma
