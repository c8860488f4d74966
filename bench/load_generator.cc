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

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/client/connection.h"
#include "core/clock.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"
#include "core/ucx/ucx_context.h"
#include "core/wire/frame_reader.h"
#include "core/wire/messages.h"

namespace ardma::bench {
namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr int kMaxEvents = 64;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// DEADLINE_EXCEEDED if the oldest request in flight (queued at `oldest_ns`) has waited too long.
absl::Status CheckStalledSince(int64_t oldest_ns, absl::Duration timeout) {
  if (absl::Nanoseconds(NowNs() - oldest_ns) > timeout) {
    return absl::DeadlineExceededError(
        absl::StrCat("no response within ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

// Ends a run: its duration, one round trip per operation, latencies sorted for percentiles.
LoadResult Finish(LoadResult result, int64_t start_ns) {
  result.elapsed = absl::Nanoseconds(NowNs() - start_ns);
  result.round_trips = result.completed;
  std::sort(result.latency_ns.begin(), result.latency_ns.end());
  return result;
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
  wire::FrameReader in{wire::WireLimits{}, kReadChunk};  // received bytes
  std::vector<std::pair<uint64_t, int64_t>> inflight;    // request id, queued at (ns)

  Sock() = default;
  Sock(const Sock&) = delete;
  Sock& operator=(const Sock&) = delete;
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
    // (Constructed in place: a Sock owns its descriptor and is neither copied nor moved.)
    socks_ = std::vector<Sock>(static_cast<size_t>(options_.connections));
    for (size_t i = 0; i < socks_.size(); ++i) {
      ARDMA_ASSIGN_OR_RETURN(
          socks_[i].fd,
          ConnectSocket(options_.AddressOf(static_cast<int>(i)), options_.connect_timeout));
      if (options_.credentials.has_value()) {
        timeval limit = absl::ToTimeval(options_.connect_timeout);
        ::setsockopt(socks_[i].fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
        ARDMA_RETURN_IF_ERROR(
            AuthenticateSocket(socks_[i].fd, *options_.credentials, limits_, nullptr));
      }
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
    return Finish(std::move(result_), start);
  }

 private:
  void Issue(Sock& s) {
    size_t start = wire::BeginFrame(&s.out);
    wire::Op op = make_frame_(issued_++, static_cast<int>(&s - socks_.data()), &s.out);
    uint64_t id = ++next_request_id_;
    wire::FinishFrame(
        {.op = op, .request_id = id, .client_id = options_.idempotent ? 0 : s.client_id}, start,
        &s.out);
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
      const size_t room = s.in.space_size();
      ssize_t n = ::recv(s.fd, s.in.space(), room, 0);
      if (n > 0) {
        s.in.Commit(static_cast<size_t>(n));
        result_.bytes += static_cast<uint64_t>(n);
        // Less than there was room for: the socket is drained for now, and epoll (level-
        // triggered) reports it again when more comes — no recv that only says EAGAIN.
        if (static_cast<size_t>(n) < room) break;
        continue;
      }
      if (n == 0) return absl::UnavailableError("the server closed a connection");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return ErrnoUnavailable("recv", errno);
    }
    int64_t now = NowNs();
    for (;;) {
      ARDMA_ASSIGN_OR_RETURN(std::optional<wire::Frame> frame, s.in.Next());
      if (!frame) break;
      const wire::FrameHeader& header = frame->header;
      if (!header.is_response()) return absl::DataLossError("the server sent a request frame");
      if (header.op == wire::Op::kHello) {  // the greeting, unasked (read already if authenticated)
        result_.bytes -= wire::kHeaderSize + header.payload_len;  // connecting, not an operation
        continue;
      }
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
            absl::Status(static_cast<absl::StatusCode>(header.status), ToAbsl(frame->payload))
                .ToString();
      }
      if (issued_ < options_.requests) Issue(s);
    }
    return absl::OkStatus();
  }

  absl::Status CheckStalled() const {
    int64_t oldest = NowNs();
    for (const Sock& s : socks_) {
      for (const auto& f : s.inflight) oldest = std::min(oldest, f.second);
    }
    return CheckStalledSince(oldest, options_.response_timeout);
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

// The same shape over UCX: one worker, one endpoint per session (each opened with UCX_CONNECT over
// its own TCP or Unix-socket connection, which stays open as long as the session), and one thread
// polling the worker. Requests and responses are active messages carrying the usual frames.
class UcxEventLoop {
 public:
  UcxEventLoop(const LoadOptions& options, const FrameMaker& make_frame)
      : options_(options), make_frame_(make_frame) {}
  ~UcxEventLoop() {
    for (const std::unique_ptr<Session>& s : sessions_) {
      if (s->ep != nullptr) ucx_->CloseEndpoint(s->ep, absl::Seconds(1));
      if (s->bootstrap != nullptr) s->bootstrap->Close();
    }
  }

  absl::StatusOr<LoadResult> Run() {
    if (options_.connections < 1 || options_.pipeline < 1) {
      return absl::InvalidArgumentError("connections and pipeline must be at least 1");
    }
    // With the features every client's worker has: the server's endpoints to this worker are
    // configured for them (UCX 1.13 aborts on an endpoint it would have to reconfigure).
    // (This thread alone uses the worker: no lock per call.)
    ARDMA_ASSIGN_OR_RETURN(ucx_, UcxContext::Create({.single_thread = true}));
    ARDMA_ASSIGN_OR_RETURN(std::string worker_address, ucx_->WorkerAddress());
    ARDMA_RETURN_IF_ERROR(ucx_->SetAmHandler(kAmResponse, &UcxEventLoop::OnResponse, this));
    for (int i = 0; i < options_.connections; ++i) {
      sessions_.push_back(std::make_unique<Session>());
      std::string_view bootstrap_address = options_.AddressOf(i);
      bootstrap_address.remove_prefix(kUcxPrefix.size());
      ARDMA_RETURN_IF_ERROR(Open(bootstrap_address, worker_address, *sessions_.back()));
    }
    result_.latency_ns.reserve(options_.requests);
    inflight_.reserve(sessions_.size() * static_cast<size_t>(options_.pipeline));
    int64_t start = NowNs();
    for (uint32_t i = 0; i < sessions_.size(); ++i) {
      for (int k = 0; k < options_.pipeline && issued_ < options_.requests; ++k) {
        ARDMA_RETURN_IF_ERROR(Issue(i));
      }
    }
    PollPacer pacer(ucx_.get());
    absl::Time next_check = FastNow();
    while (result_.completed < options_.requests) {
      if (ucp_worker_progress(ucx_->worker()) != 0) {
        pacer.Progressed();
      } else {
        pacer.Idle();
      }
      if (!failure_.ok()) return failure_;
      // Requests are sent here, never from inside the receive callback.
      for (uint32_t i : ready_) ARDMA_RETURN_IF_ERROR(Issue(i));
      ready_.clear();
      // (The pacer sleeps once the server has been silent a while: count time, not polls.)
      if (pacer.ClockDue() && FastNow() >= next_check) {
        next_check = FastNow() + absl::Milliseconds(50);
        ARDMA_RETURN_IF_ERROR(CheckStalled());
        // A session ends with its connection: a server that went away closed them.
        for (const std::unique_ptr<Session>& s : sessions_) {
          if (s->bootstrap->WaitForClose(absl::ZeroDuration())) {
            return absl::UnavailableError("the server closed a connection");
          }
        }
      }
    }
    return Finish(std::move(result_), start);
  }

 private:
  struct Session {
    std::shared_ptr<Connection> bootstrap;
    ClientCounters bootstrap_counters;
    uint64_t id = 0;  // the server's session number
    uint64_t client_id = 0;
    ucp_ep_h ep = nullptr;
  };
  struct Inflight {
    uint32_t session;
    int64_t queued_ns;
  };

  absl::Status Open(std::string_view address, const std::string& worker_address, Session& s) {
    absl::Time deadline = absl::Now() + options_.connect_timeout;
    ARDMA_ASSIGN_OR_RETURN(
        s.bootstrap,
        Connection::Open(address, options_.connect_timeout, limits_, &s.bootstrap_counters,
                         options_.credentials ? &*options_.credentials : nullptr));
    std::string payload;
    wire::EncodeUcxConnectRequest({.worker_address = worker_address}, &payload);
    ARDMA_ASSIGN_OR_RETURN(
        ResponsePayload answer,
        s.bootstrap->RoundTripOne({wire::Op::kUcxConnect, std::move(payload)}, 0, 0, deadline));
    if (!answer.ok()) return answer.status();
    ARDMA_ASSIGN_OR_RETURN(wire::UcxHello hello, wire::DecodeUcxHello(*answer));
    s.id = hello.session;
    s.client_id = RandomClientId();
    ARDMA_ASSIGN_OR_RETURN(s.ep, ucx_->Connect(hello.worker_address, deadline));
    return absl::OkStatus();
  }

  absl::Status Issue(uint32_t index) {
    Session& s = *sessions_[index];
    std::string frame;
    size_t start = wire::BeginFrame(&frame);
    wire::Op op = make_frame_(issued_++, static_cast<int>(index), &frame);
    uint64_t id = ++next_request_id_;
    wire::FinishFrame(
        {.op = op, .request_id = id, .client_id = options_.idempotent ? 0 : s.client_id}, start,
        &frame);
    result_.bytes += frame.size();
    inflight_[id] = {index, NowNs()};
    return SendActiveMessage(s.ep, kAmRequest, s.id, std::move(frame));
  }

  static ucs_status_t OnResponse(void* arg, const void* /*header*/, size_t /*header_length*/,
                                 void* data, size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxEventLoop*>(arg);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
      ucp_am_data_release(self->ucx_->worker(), data);
      self->failure_ = absl::DataLossError("the server sent a rendezvous message");
      return UCS_OK;
    }
    self->Complete(std::string_view(static_cast<const char*>(data), length));
    return UCS_OK;
  }

  void Complete(std::string_view frame) {
    int64_t now = NowNs();
    absl::StatusOr<wire::Frame> parsed = wire::ParseWholeFrame(frame, limits_);
    const wire::FrameHeader* header = parsed.ok() ? &parsed->header : nullptr;
    if (header == nullptr || !header->is_response()) {
      failure_ = absl::DataLossError("malformed response from the server");
      return;
    }
    auto it = inflight_.find(header->request_id);
    if (it == inflight_.end()) {
      failure_ = absl::DataLossError(
          absl::StrCat("response to request ", header->request_id, ", which is not in flight"));
      return;
    }
    result_.bytes += frame.size();
    result_.latency_ns.push_back(static_cast<uint64_t>(now - it->second.queued_ns));
    ++result_.completed;
    if (header->status != 0 && result_.errors++ == 0) {
      result_.first_error = absl::Status(static_cast<absl::StatusCode>(header->status),
                                         ToAbsl(frame.substr(wire::kHeaderSize)))
                                .ToString();
    }
    if (issued_ + ready_.size() < options_.requests) ready_.push_back(it->second.session);
    inflight_.erase(it);
  }

  absl::Status CheckStalled() const {
    int64_t oldest = NowNs();
    for (const auto& [id, f] : inflight_) oldest = std::min(oldest, f.queued_ns);
    return CheckStalledSince(oldest, options_.response_timeout);
  }

  const LoadOptions& options_;
  const FrameMaker& make_frame_;
  const wire::WireLimits limits_;
  std::unique_ptr<UcxContext> ucx_;
  std::vector<std::unique_ptr<Session>> sessions_;
  absl::flat_hash_map<uint64_t, Inflight> inflight_;
  std::vector<uint32_t> ready_;  // sessions whose response came in, to send their next request
  absl::Status failure_;
  uint64_t issued_ = 0;
  uint64_t next_request_id_ = 0;
  LoadResult result_;
};

absl::StatusOr<LoadResult> RunOneLoop(const LoadOptions& options, const FrameMaker& make_frame) {
  if (std::string_view(options.AddressOf(0)).starts_with(kUcxPrefix)) {
    UcxEventLoop loop(options, make_frame);
    return loop.Run();
  }
  EventLoop loop(options, make_frame);
  return loop.Run();
}

// `threads` event loops at once: loop t has connections t, t + threads, ... (their addresses as
// the whole run gives them) and every threads-th operation from t, so keys, connection numbers
// and operation numbers are those of one loop doing it all. The result is their sum, over the
// time of the slowest.
absl::StatusOr<LoadResult> RunLoops(const LoadOptions& options, const FrameMaker& make_frame) {
  const int loops = std::min(options.threads, options.connections);
  std::vector<LoadOptions> parts(static_cast<size_t>(loops), options);
  std::vector<FrameMaker> makers;
  for (int t = 0; t < loops; ++t) {
    LoadOptions& part = parts[static_cast<size_t>(t)];
    part.threads = 1;
    part.addresses.clear();
    for (int c = t; c < options.connections; c += loops) {
      part.addresses.push_back(options.AddressOf(c));
    }
    part.connections = static_cast<int>(part.addresses.size());
    part.requests = options.requests / static_cast<uint64_t>(loops) +
                    (static_cast<uint64_t>(t) < options.requests % loops ? 1 : 0);
    const uint64_t step = static_cast<uint64_t>(loops), first = static_cast<uint64_t>(t);
    makers.push_back([&make_frame, step, first](uint64_t i, int c, std::string* payload) {
      return make_frame(i * step + first, static_cast<int>(static_cast<uint64_t>(c) * step + first),
                        payload);
    });
  }
  std::vector<absl::StatusOr<LoadResult>> results(static_cast<size_t>(loops));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < parts.size(); ++t) {
    threads.emplace_back([&, t] { results[t] = RunOneLoop(parts[t], makers[t]); });
  }
  for (std::thread& thread : threads) thread.join();
  LoadResult sum;
  for (absl::StatusOr<LoadResult>& r : results) {
    if (!r.ok()) return r.status();
    if (sum.errors == 0 && r->errors > 0) sum.first_error = r->first_error;
    sum.completed += r->completed;
    sum.errors += r->errors;
    sum.elapsed = std::max(sum.elapsed, r->elapsed);
    sum.round_trips += r->round_trips;
    sum.bytes += r->bytes;
    sum.latency_ns.insert(sum.latency_ns.end(), r->latency_ns.begin(), r->latency_ns.end());
  }
  std::sort(sum.latency_ns.begin(), sum.latency_ns.end());
  return sum;
}

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
  if (options.threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (options.threads > 1 && options.connections > 1) return RunLoops(options, make_frame);
  return RunOneLoop(options, make_frame);
}

absl::StatusOr<LoadResult> RunThreads(const LoadOptions& options, const ThreadOpFactory& factory) {
  if (options.connections < 1) return absl::InvalidArgumentError("connections must be at least 1");
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<ThreadOp> ops;
  ClientOptions client_options;
  client_options.connect_timeout = options.connect_timeout;
  for (int i = 0; i < options.connections; ++i) {
    ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           Client::Connect(options.AddressOf(i), client_options));
    ARDMA_ASSIGN_OR_RETURN(ThreadOp op, factory(*client, i));
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
