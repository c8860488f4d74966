#include "core/cli/daemon_support.h"

#include <pthread.h>

#include <cstdio>
#include <fstream>

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
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << address << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace ardma
