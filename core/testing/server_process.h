// ServerProcess: an ardmad child process on 127.0.0.1:0, for tests that need the server in its
// own process (signals, SIGKILL and restart, SIGSTOP). Kills it (SIGKILL) when destroyed.
#ifndef ARDMA_CORE_TESTING_SERVER_PROCESS_H_
#define ARDMA_CORE_TESTING_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ardma {
class Client;
}

namespace ardma::testing {

// A path in the temporary directory unique to this process and the running test.
std::string TempPath(const std::string& name);

// Resident memory of process `pid`, in bytes (0 if unknown).
uint64_t ResidentBytes(pid_t pid);
// Resident memory of process `pid` per mapping ("start-end path" -> bytes, from /proc/PID/smaps),
// and the mappings that grew most from `before` to `after`, as "+N KiB name; ..." (at most
// `count` of them): what a memory bound's failure message names.
std::map<std::string, uint64_t> ResidentByMapping(pid_t pid);
std::string LargestGrowth(const std::map<std::string, uint64_t>& before,
                          const std::map<std::string, uint64_t>& after, int count = 4);
// One STATS counter of the server `client` talks to; UINT64_MAX if it cannot be read.
uint64_t StatOf(Client& client, const std::string& name);

// Sends `signal` to child *pid, waits for it to end and marks it gone (*pid = -1); its wait
// status, or -1 if none runs.
int KillAndWait(pid_t* pid, int signal);

class ServerProcess {
 public:
  // Starts $ARDMA_BIN_DIR/ardmad --listen 127.0.0.1:0 --quiet `extra...` and waits (up to 20 s)
  // until it listens. address() is empty if it did not start.
  explicit ServerProcess(std::vector<std::string> extra);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  // Sends `signal` (SIGSTOP, SIGCONT, ...) without waiting.
  void Signal(int signal);
  // SIGSTOP, then waits (up to 5 s) until the kernel shows the process stopped; false if it did
  // not.
  bool Freeze();
  // Sends `signal`, waits for the process to end and returns its wait status (-1 if none runs).
  int Kill(int signal);
  // Whether the process has ended by itself: its wait status, reaped; nullopt while it runs.
  std::optional<int> Exited();

 private:
  pid_t pid_ = -1;
  std::string port_file_;
  std::string address_;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_SERVER_PROCESS_H_
