#include "services/monitor/socket_daemon.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "core/net/listen_socket.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/monitor/load_sample.h"

namespace ardma::monitor {
namespace {

std::string Response(uint8_t status, std::string_view bytes) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U8(status);
  w.Bytes32(bytes);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketDaemon>> SocketDaemon::Start(const DaemonOptions& options) {
  {
    ProcSampler probe(options.procfs);
    ARDMA_RETURN_IF_ERROR(probe.Sample().status());
  }
  ARDMA_ASSIGN_OR_RETURN(ListeningSocket listening, ListenSocket(options.listen));
  std::unique_ptr<SocketDaemon> daemon(
      new SocketDaemon(options, listening.fd, std::move(listening.address)));
  if (options.interval > absl::ZeroDuration()) {
    ProcSampler first(options.procfs);
    first.set_next_sequence(daemon->next_sequence_.fetch_add(1));
    ARDMA_ASSIGN_OR_RETURN(LoadSample sample, first.Sample());
    {
      absl::MutexLock lock(&daemon->mu_);
      daemon->latest_ = EncodeSample(sample);
    }
    daemon->calculator_ = std::thread([d = daemon.get()] { d->Calculate(); });
  }
  daemon->acceptor_ = std::thread([d = daemon.get()] { d->AcceptLoop(); });
  return daemon;
}

SocketDaemon::SocketDaemon(const DaemonOptions& options, int listen_fd, std::string address)
    : options_(options), listen_fd_(listen_fd), address_(std::move(address)) {}

SocketDaemon::~SocketDaemon() { Stop(); }

void SocketDaemon::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::list<Reporter> reporters;
  {
    absl::MutexLock lock(&mu_);
    stop_calculating_ = true;
    for (Reporter& r : reporters_) {
      if (r.fd >= 0) ::shutdown(r.fd, SHUT_RDWR);
    }
    reporters.swap(reporters_);
  }
  for (Reporter& r : reporters) r.thread.join();
  if (calculator_.joinable()) calculator_.join();
}

void SocketDaemon::AcceptLoop() {
  pthread_setname_np(pthread_self(), "monitord-accept");
  while (!stopping_.load()) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::list<Reporter> finished;
    absl::MutexLock lock(&mu_);
    if (stopping_.load()) {
      ::close(fd);
      break;
    }
    for (auto it = reporters_.begin(); it != reporters_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), reporters_, it);
      it = next;
    }
    Reporter& r = reporters_.emplace_back();
    r.fd = fd;
    r.thread = std::thread([this, &r] { Serve(&r); });
    mu_.Unlock();
    for (Reporter& f : finished) f.thread.join();
    mu_.Lock();
  }
}

void SocketDaemon::Serve(Reporter* reporter) {
  pthread_setname_np(pthread_self(), "monitord-report");
  const int fd = reporter->fd;
  ProcSampler sampler(options_.procfs);
  char request;
  while (RecvExactly(fd, &request, 1).ok()) {
    std::string response;
    if (request == kSocketSync) {
      sampler.set_next_sequence(next_sequence_.fetch_add(1));
      absl::StatusOr<LoadSample> sample = sampler.Sample();
      response = sample.ok() ? Response(0, EncodeSample(*sample))
                             : Response(1, FromAbsl(sample.status().message()));
    } else if (request == kSocketAsync) {
      std::string latest = LatestSample();
      response = !latest.empty() ? Response(0, latest)
                                 : Response(1,
                                            "this daemon runs no calculating thread: start "
                                            "ardma-monitord with --interval for Socket-Async");
    } else {
      response = Response(1, "unknown request (send 'S' or 'A')");
    }
    if (!SendAll(fd, response).ok()) break;
  }
  absl::MutexLock lock(&mu_);
  ::close(fd);
  reporter->fd = -1;
  reporter->done = true;
}

std::string SocketDaemon::LatestSample() {
  absl::MutexLock lock(&mu_);
  return latest_;
}

void SocketDaemon::Calculate() {
  pthread_setname_np(pthread_self(), "monitord-calc");
  ProcSampler sampler(options_.procfs);
  absl::Time next = absl::Now();
  for (;;) {
    next = std::max(next + options_.interval, absl::Now());
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stop_calculating_), next)) return;
    }
    sampler.set_next_sequence(next_sequence_.fetch_add(1));
    absl::StatusOr<LoadSample> sample = sampler.Sample();
    if (!sample.ok()) continue;
    std::string encoded = EncodeSample(*sample);
    absl::MutexLock lock(&mu_);
    latest_.swap(encoded);
  }
}

}  // namespace ardma::monitor
