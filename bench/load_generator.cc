#include "bench/load_generator.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma::bench {
namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr int kMaxEvents = 64;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t RandomClientId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32 | rd()) | 1;  // never 0: 0 opts out of de-dup
}

struct Sock {
  int fd = -1;
  uint64_t client_id = 0;
  std::string out;  // frames not yet sent, from out_pos
  size_t out_pos = 0;
  bool watching_out = false;
  std::vector<char> in = std::vector<char>(kReadChunk);  // received bytes: [in_begin, in_end)
  size_t in_begin = 0, in_end = 0;
  std::vector<std::pair<uint64_t, int64_t>> inflight;  // request id, queued at (ns)

  ~Sock() {
    if (fd >= 0) ::close(fd);
  }
};

class EventLoop {
 public:
  EventLoop(const LoadOptions& options, const FrameMaker& make_frame)
      : options_(options), make_frame_(make_frame) {}
  ~EventLoop() {
    if (epoll_ >= 0) ::close(epoll_);
  }

  absl::StatusOr<LoadResult> Run() {
    if (options_.connections < 1 || options_.pipeline < 1) {
      return absl::InvalidArgumentError("connections and pipeline must be at least 1");
    }
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) return ErrnoUnavailable("epoll_create1", errno);
    socks_.resize(static_cast<size_t>(options_.connections));
    for (size_t i = 0; i < socks_.size(); ++i) {
      ARDMA_ASSIGN_OR_RETURN(socks_[i].fd,
                             ConnectSocket(options_.address, options_.connect_timeout));
      socks_[i].client_id = RandomClientId();
      ::fcntl(socks_[i].fd, F_SETFL, ::fcntl(socks_[i].fd, F_GETFL) | O_NONBLOCK);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, socks_[i].fd, &ev) != 0) {
        return ErrnoUnavailable("epoll_ctl", errno);
      }
    }
    result_.latency_ns.reserve(options_.requests);
    int64_t start = NowNs();
    for (Sock& s : socks_) {
      while (static_cast<int>(s.inflight.size()) < options_.pipeline &&
             issued_ < options_.requests) {
        Issue(s);
      }
      ARDMA_RETURN_IF_ERROR(Flush(s));
    }
    epoll_event events[kMaxEvents];
    while (result_.completed < options_.requests) {
      int n = ::epoll_wait(epoll_, events, kMaxEvents, 1000);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoUnavailable("epoll_wait", errno);
      if (n == 0) ARDMA_RETURN_IF_ERROR(CheckStalled());
      for (int e = 0; e < n; ++e) {
        Sock& s = socks_[events[e].data.u64];
        if (events[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ARDMA_RETURN_IF_ERROR(Receive(s));
        ARDMA_RETURN_IF_ERROR(Flush(s));
      }
    }
    result_.elapsed = absl::Nanoseconds(NowNs() - start);
    result_.round_trips = result_.completed;
    std::sort(result_.latency_ns.begin(), result_.latency_ns.end());
    return std::move(result_);
  }

 private:
  void Issue(Sock& s) {
    size_t start = wire::BeginFrame(&s.out);
    wire::Op op = make_frame_(issued_++, &s.out);
    uint64_t id = ++next_request_id_;
    wire::FinishFrame({.op = op, .request_id = id, .client_id = s.client_id}, start, &s.out);
    result_.bytes += s.out.size() - start;
    s.inflight.emplace_back(id, NowNs());
  }

  absl::Status Flush(Sock& s) {
    while (s.out_pos < s.out.size()) {
      ssize_t n = ::send(s.fd, s.out.data() + s.out_pos, s.out.size() - s.out_pos, MSG_NOSIGNAL);
      if (n > 0) {
        s.out_pos += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        return ErrnoUnavailable("send", errno);
      }
    }
    bool pending = s.out_pos < s.out.size();
    if (!pending) {
      s.out.clear();
      s.out_pos = 0;
    }
    if (pending != s.watching_out) {
      epoll_event ev{};
      ev.events = pending ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
      ev.data.u64 = static_cast<uint64_t>(&s - socks_.data());
      if (::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &ev) != 0) {
        return ErrnoUnavailable("epoll_ctl", errno);
      }
      s.watching_out = pending;
    }
    return absl::OkStatus();
  }

  absl::Status Receive(Sock& s) {
    for (;;) {
      if (s.in_end == s.in.size()) {
        // Full: move the unparsed tail to the front, and grow if that frees nothing.
        std::copy(s.in.begin() + s.in_begin, s.in.begin() + s.in_end, s.in.begin());
        s.in_end -= s.in_begin;
        s.in_begin = 0;
        if (s.in_end == s.in.size()) s.in.resize(2 * s.in.size());
      }
      ssize_t n = ::recv(s.fd, s.in.data() + s.in_end, s.in.size() - s.in_end, 0);
      if (n > 0) {
        s.in_end += static_cast<size_t>(n);
        result_.bytes += static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) return absl::UnavailableError("the server closed a connection");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return ErrnoUnavailable("recv", errno);
    }
    int64_t now = NowNs();
    while (s.in_end - s.in_begin >= wire::kHeaderSize) {
      std::string_view rest(s.in.data() + s.in_begin, s.in_end - s.in_begin);
      ARDMA_ASSIGN_OR_RETURN(wire::FrameHeader header, wire::DecodeHeader(rest, limits_));
      if (rest.size() < wire::kHeaderSize + header.payload_len) break;
      if (!header.is_response()) return absl::DataLossError("the server sent a request frame");
      auto it = std::find_if(s.inflight.begin(), s.inflight.end(),
                             [&](const auto& f) { return f.first == header.request_id; });
      if (it == s.inflight.end()) {
        return absl::DataLossError(
            absl::StrCat("response to request ", header.request_id, ", which is not in flight"));
      }
      result_.latency_ns.push_back(static_cast<uint64_t>(now - it->second));
      *it = s.inflight.back();
      s.inflight.pop_back();
      ++result_.completed;
      if (header.status != 0 && result_.errors++ == 0) {
        result_.first_error =
            absl::Status(static_cast<absl::StatusCode>(header.status),
                         ToAbsl(rest.substr(wire::kHeaderSize, header.payload_len)))
                .ToString();
      }
      s.in_begin += wire::kHeaderSize + header.payload_len;
      if (issued_ < options_.requests) Issue(s);
    }
    if (s.in_begin == s.in_end) s.in_begin = s.in_end = 0;
    return absl::OkStatus();
  }

  absl::Status CheckStalled() const {
    int64_t oldest = NowNs();
    for (const Sock& s : socks_) {
      for (const auto& f : s.inflight) oldest = std::min(oldest, f.second);
    }
    if (absl::Nanoseconds(NowNs() - oldest) > options_.response_timeout) {
      return absl::DeadlineExceededError(
          absl::StrCat("no response within ", absl::FormatDuration(options_.response_timeout)));
    }
    return absl::OkStatus();
  }

  const LoadOptions& options_;
  const FrameMaker& make_frame_;
  const wire::WireLimits limits_;
  int epoll_ = -1;
  std::vector<Sock> socks_;
  uint64_t issued_ = 0;
  uint64_t next_request_id_ = 0;
  LoadResult result_;
};

}  // namespace

double LoadResult::OpsPerSecond() const {
  double s = absl::ToDoubleSeconds(elapsed);
  return s > 0 ? static_cast<double>(completed) / s : 0;
}

double LoadResult::AverageMs() const {
  if (latency_ns.empty()) return 0;
  double sum = 0;
  for (uint64_t ns : latency_ns) sum += static_cast<double>(ns);
  return sum / static_cast<double>(latency_ns.size()) / 1e6;
}

double LoadResult::PercentileMs(double p) const {
  if (latency_ns.empty()) return 0;
  // Nearest rank.
  double rank =
      std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(latency_ns.size()));
  size_t index = std::min(latency_ns.size() - 1, static_cast<size_t>(std::max(rank, 1.0)) - 1);
  return static_cast<double>(latency_ns[index]) / 1e6;
}

double LoadResult::RoundTripsPerOp() const {
  return completed == 0 ? 0 : static_cast<double>(round_trips) / static_cast<double>(completed);
}

double LoadResult::BytesPerOp() const {
  return completed == 0 ? 0 : static_cast<double>(bytes) / static_cast<double>(completed);
}

absl::StatusOr<LoadResult> RunEventLoop(const LoadOptions& options, const FrameMaker& make_frame) {
  EventLoop loop(options, make_frame);
  return loop.Run();
}

absl::StatusOr<LoadResult> RunThreads(const LoadOptions& options, const ThreadOpFactory& factory) {
  if (options.connections < 1) return absl::InvalidArgumentError("connections must be at least 1");
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<ThreadOp> ops;
  ClientOptions client_options;
  client_options.connect_timeout = options.connect_timeout;
  for (int i = 0; i < options.connections; ++i) {
    ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           Client::Connect(options.address, client_options));
    ARDMA_ASSIGN_OR_RETURN(ThreadOp op, factory(*client));
    clients.push_back(std::move(client));
    ops.push_back(std::move(op));
  }
  uint64_t rt0 = 0, bytes0 = 0;
  for (auto& client : clients) {
    rt0 += client->counters().round_trips;
    bytes0 += client->counters().bytes_sent + client->counters().bytes_received;
  }
  std::atomic<uint64_t> next{0};
  absl::Mutex mu;
  LoadResult result;
  result.latency_ns.reserve(options.requests);
  int64_t start = NowNs();
  std::vector<std::thread> threads;
  for (ThreadOp& thread_op : ops) {
    threads.emplace_back([&, op = &thread_op] {
      std::vector<uint64_t> latencies;
      uint64_t errors = 0;
      std::string first_error;
      for (uint64_t i; (i = next.fetch_add(1)) < options.requests;) {
        int64_t t0 = NowNs();
        absl::Status status = (*op)(i);
        latencies.push_back(static_cast<uint64_t>(NowNs() - t0));
        if (!status.ok() && errors++ == 0) first_error = status.ToString();
      }
      absl::MutexLock lock(&mu);
      result.latency_ns.insert(result.latency_ns.end(), latencies.begin(), latencies.end());
      if (result.errors == 0 && errors > 0) result.first_error = first_error;
      result.errors += errors;
    });
  }
  for (std::thread& t : threads) t.join();
  result.elapsed = absl::Nanoseconds(NowNs() - start);
  result.completed = result.latency_ns.size();
  for (auto& client : clients) {
    result.round_trips += client->counters().round_trips;
    result.bytes += client->counters().bytes_sent + client->counters().bytes_received;
  }
  result.round_trips -= rt0;
  result.bytes -= bytes0;
  std::sort(result.latency_ns.begin(), result.latency_ns.end());
  return result;
}

}  // namespace ardma::bench
