// DelayProxy: a TCP proxy that holds every byte for a fixed one-way delay in each direction, to
// sweep the network round-trip time seen by clients (the Active RDMA paper's latency axis) on one machine.
//
//   ARDMA_ASSIGN_OR_RETURN(auto proxy, DelayProxy::Start("127.0.0.1:15712", absl::Microseconds(100)));
//   // clients connect to proxy->address(): every round trip now takes >= 200 us more
//
// Each direction of each connection has a reader that stamps chunks and a writer that releases
// them when their time comes, in order. Delays are met to the scheduler's precision (tens of
// microseconds); measure the round trip through the proxy rather than assume it.
#ifndef ARDMA_BENCH_DELAY_PROXY_H_
#define ARDMA_BENCH_DELAY_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ardma::bench {

class DelayProxy {
 public:
  // Listens on 127.0.0.1:0 and forwards to `target` ("host:port").
  static absl::StatusOr<std::unique_ptr<DelayProxy>> Start(std::string target,
                                                          absl::Duration one_way_delay);
  ~DelayProxy();  // Stop()
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  std::string address() const;  // 127.0.0.1:PORT
  absl::Duration delay() const { return delay_; }
  void Stop();

 private:
  DelayProxy(int listen_fd, uint16_t port, std::string target, absl::Duration delay)
      : listen_fd_(listen_fd), port_(port), target_(std::move(target)), delay_(delay) {}
  void AcceptLoop();
  void Pump(int from, int to);

  const int listen_fd_;
  const uint16_t port_;
  const std::string target_;
  const absl::Duration delay_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ardma::bench

#endif  // ARDMA_BENCH_DELAY_PROXY_H_
