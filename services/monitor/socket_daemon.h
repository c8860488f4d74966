// ardma-monitord as a library: the Socket-Sync and Socket-Async baselines of the RDMA load-monitoring paper, a plain
// TCP monitoring daemon on the back end (no Active RDMA involved).
//
// Protocol, per connection, any number of times:
//   request  := 'S' (Socket-Sync: sample /proc now) | 'A' (Socket-Async: the calculating thread's
//               latest sample)
//   response := status:u8 (0 ok, 1 error)  length:u32  bytes (an encoded LoadSample, or the error)
// A reporting thread serves each connection; with an interval, a calculating thread samples every
// interval into memory that 'A' copies out (Figure 1 of the paper). Without one, 'A' is an error.
//
//   ARDMA_ASSIGN_OR_RETURN(auto daemon, SocketDaemon::Start({.listen = "127.0.0.1:0"}));
//   ... connect to daemon->address() ...
#ifndef ARDMA_SERVICES_MONITOR_SOCKET_DAEMON_H_
#define ARDMA_SERVICES_MONITOR_SOCKET_DAEMON_H_

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ardma::monitor {

inline constexpr char kSocketSync = 'S';
inline constexpr char kSocketAsync = 'A';

struct DaemonOptions {
  std::string listen = "127.0.0.1:15713";
  std::string procfs = "/proc";
  absl::Duration interval = absl::ZeroDuration();  // > 0: run the calculating thread
};

class SocketDaemon {
 public:
  // Fails if the address cannot be bound or the procfs cannot be sampled.
  static absl::StatusOr<std::unique_ptr<SocketDaemon>> Start(const DaemonOptions& options);
  ~SocketDaemon();
  SocketDaemon(const SocketDaemon&) = delete;
  SocketDaemon& operator=(const SocketDaemon&) = delete;

  const std::string& address() const { return address_; }
  void Stop();

 private:
  struct Reporter {
    int fd = -1;
    bool done = false;  // Serve returned: the thread can be joined
    std::thread thread;
  };

  SocketDaemon(const DaemonOptions& options, int listen_fd, std::string address);
  void AcceptLoop();
  void Serve(Reporter* reporter);
  void Calculate();
  std::string LatestSample();

  const DaemonOptions options_;
  const int listen_fd_;
  const std::string address_;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  std::list<Reporter> reporters_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_sequence_{1};  // one sequence for all of the daemon's samples
  std::string latest_ ABSL_GUARDED_BY(mu_);  // the calculating thread's last encoded sample
  bool stop_calculating_ ABSL_GUARDED_BY(mu_) = false;
  std::thread acceptor_;
  std::thread calculator_;
};

}  // namespace ardma::monitor

#endif  // ARDMA_SERVICES_MONITOR_SOCKET_DAEMON_H_
