#include "bench/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <deque>

#include "absl/strings/str_cat.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma::bench {
namespace {

struct Chunk {
  absl::Time due;
  std::string bytes;
};

// One direction's queue between its reader and its writer.
struct Queue {
  absl::Mutex mu;
  std::deque<Chunk> chunks ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
  static bool Ready(Queue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu) {
    return !q->chunks.empty() || q->closed;
  }
};

// Sleeps until `t`, spinning for the last stretch (sleeps overshoot by tens of microseconds).
void WaitUntil(absl::Time t) {
  constexpr absl::Duration kSpin = absl::Microseconds(60);
  absl::Duration left = t - absl::Now();
  if (left > kSpin) absl::SleepFor(left - kSpin);
  while (absl::Now() < t) {
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DelayProxy>> DelayProxy::Start(std::string target,
                                                              absl::Duration one_way_delay) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoUnavailable("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status s = ErrnoUnavailable("listen", errno);
    ::close(fd);
    return s;
  }
  std::unique_ptr<DelayProxy> proxy(
      new DelayProxy(fd, ntohs(addr.sin_port), std::move(target), one_way_delay));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->AcceptLoop(); });
  return proxy;
}

DelayProxy::~DelayProxy() { Stop(); }

std::string DelayProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void DelayProxy::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> pumps;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    pumps.swap(pumps_);
  }
  for (std::thread& t : pumps) t.join();
  absl::MutexLock lock(&mu_);
  for (int fd : fds_) ::close(fd);
  fds_.clear();
}

void DelayProxy::AcceptLoop() {
  while (!stopping_) {
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR) continue;
      return;  // shut down
    }
    absl::StatusOr<int> server = ConnectSocket(target_, absl::Seconds(5));
    if (!server.ok()) {
      ::close(client);
      continue;
    }
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    absl::MutexLock lock(&mu_);
    fds_.push_back(client);
    fds_.push_back(*server);
    pumps_.emplace_back([this, client, s = *server] { Pump(client, s); });
    pumps_.emplace_back([this, client, s = *server] { Pump(s, client); });
  }
}

// Reads from `from`, releases to `to` `delay_` after each chunk arrived.
void DelayProxy::Pump(int from, int to) {
  Queue q;
  std::thread writer([&] {
    for (;;) {
      Chunk c;
      {
        absl::MutexLock lock(&q.mu);
        q.mu.Await(absl::Condition(&Queue::Ready, &q));
        if (q.chunks.empty()) return;
        c = std::move(q.chunks.front());
        q.chunks.pop_front();
      }
      WaitUntil(c.due);
      for (size_t done = 0; done < c.bytes.size();) {
        ssize_t n = ::send(to, c.bytes.data() + done, c.bytes.size() - done, MSG_NOSIGNAL);
        if (n <= 0) {
          ::shutdown(from, SHUT_RDWR);
          return;
        }
        done += static_cast<size_t>(n);
      }
    }
  });
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(from, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&q.mu);
    q.chunks.push_back({absl::Now() + delay_, std::string(buf, static_cast<size_t>(n))});
  }
  {
    absl::MutexLock lock(&q.mu);
    q.closed = true;
  }
  writer.join();
  ::shutdown(to, SHUT_WR);
}

}  // namespace ardma::bench
