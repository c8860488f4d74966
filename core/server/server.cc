#include "core/server/server.h"

#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstring>
#include <deque>
#include <filesystem>
#include <list>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/active/local_context.h"
#include "core/active/native_loader.h"
#include "core/host_port.h"
#include "core/log.h"
#include "core/memory/heap.h"
#include "core/net/listen_socket.h"
#include "core/server/thread_placement.h"
#include "core/server/tls_context.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using local = asio::local::stream_protocol;

constexpr size_t kInitialReadBuffer = 64 << 10;
constexpr auto kExpiryPeriod = std::chrono::milliseconds(20);
constexpr std::chrono::seconds kTlsHandshakeTimeout{10};

// The remote end of a connection, for the log: "127.0.0.1:41234", or "unix" for a Unix socket.
template <typename Socket>
std::string PeerName(Socket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.lowest_layer().remote_endpoint(ec);
  if (ec) return "an unknown peer";
  if constexpr (std::is_same_v<decltype(endpoint), tcp::endpoint>) {
    return absl::StrCat(endpoint.address().to_string(), ":", endpoint.port());
  } else {
    return "a Unix-socket client";
  }
}

// Whether a bound numeric address is a loopback one (127.0.0.0/8, ::1, ::ffff:127.x.y.z).
bool IsLoopback(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.rfind("::ffff:", 0) == 0) host.remove_prefix(7);
  return host == "::1" || host.rfind("127.", 0) == 0;
}

// What the server keeps of a connection, whatever its socket type.
class SessionBase : public ResponseSink {
 public:
  // Closes from any thread.
  virtual void Shutdown() = 0;
};

// One connection over a TCP or Unix-domain stream socket. Lives on one io_context (one thread),
// so its members need no lock; Send from other threads posts itself over.
template <typename Socket>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Socket>> {
 public:
  using std::enable_shared_from_this<Session<Socket>>::shared_from_this;

  Session(Socket socket, asio::io_context& io, RequestHandler& handler)
      : socket_(std::move(socket)),
        executor_(io.get_executor()),
        handler_(handler),
        resume_(executor_),
        frame_timer_(executor_),
        peer_(PeerName(socket_)) {}

  void Start() {
    ARDMA_LOG(kDebug, "connection from %s opened", peer_);
    handler_.counters().connections_open.fetch_add(1, std::memory_order_relaxed);
    Send(handler_.Greeting(*this));
    asio::co_spawn(executor_, ReadLoop(shared_from_this()), asio::detached);
  }

  void Send(std::string frame) override {
    if (executor_.running_in_this_thread()) {
      Enqueue(std::move(frame));
      Flush();
      return;
    }
    asio::post(executor_, [self = shared_from_this(), frame = std::move(frame)]() mutable {
      self->Enqueue(std::move(frame));
      self->Flush();
    });
  }

  void SendAndClose(std::string frame) override {
    auto finish = [](Session& self, std::string frame) {
      self.Enqueue(std::move(frame));
      self.close_when_written_ = true;
      self.Flush();
    };
    if (executor_.running_in_this_thread()) {
      finish(*this, std::move(frame));
      return;
    }
    asio::post(executor_, [self = shared_from_this(), frame = std::move(frame), finish]() mutable {
      finish(*self, std::move(frame));
    });
  }

  bool Open() const override { return open_.load(std::memory_order_acquire); }
  Socket& socket() { return socket_; }

  void Shutdown() override {
    asio::post(executor_, [self = shared_from_this()] { self->Close(); });
  }

 private:
  static asio::awaitable<void> ReadLoop(std::shared_ptr<Session> self) {
    co_await self->Read();
    // A refused connection closes once its last answer is written (Flush).
    if (!self->close_when_written_ || !self->writing_) self->Close();
  }

  asio::awaitable<void> Read() {
    const wire::WireLimits& limits = handler_.limits();
    std::vector<char> buf(kInitialReadBuffer);
    size_t begin = 0, end = 0;
    uint64_t requests_at_last_read = 0;
    for (;;) {
      // Handle every complete frame in the buffer; their responses go out in one write.
      while (end - begin >= wire::kHeaderSize) {
        // Back-pressure: no more than the limit of unanswered requests (or of answers the
        // client has not taken), even when more frames are already buffered.
        if (Full()) {
          Flush();
          co_await WaitForRoom();
          if (!Open()) co_return;
          continue;
        }
        absl::StatusOr<wire::FrameHeader> header =
            wire::DecodeHeader(std::string_view(buf.data() + begin, wire::kHeaderSize), limits);
        if (!header.ok()) {
          co_await ProtocolError(std::string_view(buf.data() + begin, wire::kHeaderSize),
                                 header.status());
          co_return;
        }
        size_t frame_size = wire::kHeaderSize + header->payload_len;
        if (end - begin < frame_size) {
          // Incomplete: move it to the front; if the buffer is then full, double it (never past
          // the frame). Memory follows the bytes that actually arrived, not the claimed length.
          if (buf.size() - begin < frame_size) {
            std::copy(buf.begin() + begin, buf.begin() + end, buf.begin());
            end -= begin;
            begin = 0;
            if (end == buf.size()) buf.resize(std::min(frame_size, 2 * buf.size()));
          }
          break;
        }
        ++inflight_;
        ++requests_;
        handler_.Handle(
            *header, std::string_view(buf.data() + begin + wire::kHeaderSize, header->payload_len),
            shared_from_this());
        begin += frame_size;
        if (close_when_written_) co_return;  // refused: nothing more is read (Flush closes)
      }
      Flush();
      if (begin == end) {
        begin = end = 0;
        // Give back a buffer grown for one large frame.
        if (buf.size() > 4 * kInitialReadBuffer) {
          buf.resize(kInitialReadBuffer);
          buf.shrink_to_fit();
        }
      } else if (buf.size() - end < 4096 && begin > 0) {
        std::copy(buf.begin() + begin, buf.begin() + end, buf.begin());
        end -= begin;
        begin = 0;
      }
      // Back-pressure: stop reading while too many requests are unanswered.
      auto paused_from = std::chrono::steady_clock::now();
      co_await WaitForRoom();
      if (!Open()) co_return;
      TimeFrame(end > begin, requests_ != requests_at_last_read,
                std::chrono::steady_clock::now() - paused_from);
      requests_at_last_read = requests_;
      boost::system::error_code ec;
      size_t n = co_await socket_.async_read_some(asio::buffer(buf.data() + end, buf.size() - end),
                                                  asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      end += n;
    }
  }

  // The deadline of the frame being received (WireLimits::frame_timeout_ms): armed when part of a
  // frame is buffered, armed afresh whenever a frame completed (`progressed`), moved by the time
  // the server itself did not read (`paused`), dropped once no partial frame is left. When it
  // fires the connection is closed.
  void TimeFrame(bool partial, bool progressed, std::chrono::steady_clock::duration paused) {
    uint32_t timeout_ms = handler_.limits().frame_timeout_ms;
    if (timeout_ms == 0) return;
    if (!partial) {
      if (frame_timed_) frame_timer_.cancel();
      frame_timed_ = false;
      return;
    }
    bool fresh = !frame_timed_ || progressed;
    if (!fresh && paused < std::chrono::milliseconds(1)) return;
    frame_timer_.expires_at(fresh ? std::chrono::steady_clock::now() +
                                        std::chrono::milliseconds(timeout_ms)
                                  : frame_timer_.expiry() + paused);
    frame_timed_ = true;
    frame_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || !self->frame_timed_ || !self->Open()) return;
      self->handler_.counters().protocol_errors.fetch_add(1, std::memory_order_relaxed);
      ARDMA_LOG(kWarning,
                "closing the connection from %s: a frame begun did not arrive whole in %u ms",
                self->peer_, self->handler_.limits().frame_timeout_ms);
      self->Close();
    });
  }

  // Too many requests unanswered, or too many answer bytes not yet taken by the client.
  bool Full() const {
    const wire::WireLimits& limits = handler_.limits();
    return inflight_ >= limits.max_inflight_per_connection ||
           queued_bytes_ >= limits.max_queued_bytes_per_connection;
  }

  // Returns once the connection has room again (Enqueue and finished writes wake it) or closed.
  asio::awaitable<void> WaitForRoom() {
    while (Full() && Open()) {
      boost::system::error_code ignored;
      resume_.expires_at(asio::steady_timer::time_point::max());
      co_await resume_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }

  // The frame cannot be parsed: answer if the header names a request, then close.
  asio::awaitable<void> ProtocolError(std::string_view raw, const absl::Status& status) {
    handler_.counters().protocol_errors.fetch_add(1, std::memory_order_relaxed);
    ARDMA_LOG(kDebug, "closing connection: %s", status.ToString());
    uint32_t magic;
    std::memcpy(&magic, raw.data(), 4);
    if (magic == wire::kMagic) {
      wire::FrameHeader h;
      std::memcpy(&h.request_id, raw.data() + 16, 8);
      std::memcpy(&h.client_id, raw.data() + 24, 8);
      h.op = static_cast<wire::Op>(raw[5]);
      handler_.counters().errors.fetch_add(1, std::memory_order_relaxed);
      Enqueue(wire::EncodeErrorResponse(h, status));
      ++inflight_;
      std::vector<asio::const_buffer> buffers;
      for (const std::string& f : queue_) buffers.push_back(asio::buffer(f));
      if (!writing_) {
        boost::system::error_code ec;
        co_await asio::async_write(socket_, buffers, asio::redirect_error(asio::use_awaitable, ec));
      }
    }
    co_return;
  }

  void Enqueue(std::string frame) {
    if (inflight_ > 0) --inflight_;
    if (inflight_ + 1 == handler_.limits().max_inflight_per_connection) resume_.cancel();
    if (!Open()) return;
    queued_bytes_ += frame.size();
    queue_.push_back(std::move(frame));
  }

  void Flush() {
    if (writing_ || queue_.empty() || !Open()) return;
    writing_ = true;
    writing_frames_.swap(queue_);
    write_buffers_.clear();
    for (const std::string& f : writing_frames_) write_buffers_.push_back(asio::buffer(f));
    asio::async_write(socket_, write_buffers_,
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        self->writing_ = false;
                        bool was_full = self->Full();
                        for (const std::string& f : self->writing_frames_) {
                          self->queued_bytes_ -= std::min<uint64_t>(self->queued_bytes_, f.size());
                        }
                        self->writing_frames_.clear();
                        if (was_full && !self->Full()) self->resume_.cancel();  // wake the reader
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->Flush();
                        if (!self->writing_ && self->close_when_written_) self->Close();
                      });
  }

  void Close() {
    if (!open_.exchange(false)) return;
    ARDMA_LOG(kDebug, "connection from %s closed after %u requests", peer_, requests_);
    handler_.counters().connections_open.fetch_sub(1, std::memory_order_relaxed);
    handler_.ConnectionClosed(this);
    boost::system::error_code ignored;
    socket_.lowest_layer().shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.lowest_layer().close(ignored);
    resume_.cancel();
    frame_timer_.cancel();
    queue_.clear();
    queued_bytes_ = 0;
  }

  Socket socket_;
  asio::io_context::executor_type executor_;
  RequestHandler& handler_;
  asio::steady_timer resume_;       // wakes the reader when in-flight requests drop below the limit
  asio::steady_timer frame_timer_;  // TimeFrame
  bool frame_timed_ = false;
  // Written on the session's thread; read by worker threads deciding whether to answer.
  std::atomic<bool> open_{true};
  uint32_t inflight_ = 0;
  uint64_t queued_bytes_ = 0;  // in queue_ and writing_frames_
  std::vector<std::string> queue_;
  std::vector<std::string> writing_frames_;
  std::vector<asio::const_buffer> write_buffers_;
  bool writing_ = false;
  bool close_when_written_ = false;  // SendAndClose: close once the queue is written
  const std::string peer_;           // for the log
  uint64_t requests_ = 0;
};

}  // namespace

// Members are destroyed in reverse order: the handler (whose parked requests and de-dup waiters
// may own sessions, and so sockets) goes first, while the io_contexts still exist; the regions and
// the registry last, after everything that runs code against them.
int DefaultIoThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n, 1u, 8u));
}

struct Server::Impl {
  ServerOptions options;
  RegionTable regions;
  CodeRegistry registry;

  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::thread> threads;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<local::acceptor> unix_acceptor;  // with --unix-socket
  std::unique_ptr<asio::ssl::context> tls;         // with --tls-cert: the TCP listener's TLS
  std::unique_ptr<asio::steady_timer> expiry;
  std::unique_ptr<RequestHandler> handler;
  std::unique_ptr<UcxServer> ucx;  // after the handler: stopped and destroyed before it
  size_t next_io = 0;
  HostPort bound;

  absl::Mutex mu;
  std::list<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);
  bool stopped ABSL_GUARDED_BY(mu) = false;
  absl::Notification done;

  // A failed accept (most often out of file descriptors: the connection stays queued) is retried
  // after a pause that grows to 1 s while the failures go on, and logged once per 10 s with the
  // number of failures: never a spin, never a flood of log lines.
  uint64_t accept_failures = 0;  // (touched on the acceptors' executor only)
  uint64_t accept_failures_logged = 0;
  int64_t accept_logged_ns = 0;
  absl::Duration accept_pause = absl::Milliseconds(10);
  template <typename Acceptor>
  void AcceptFailed(Acceptor* acceptor, const boost::system::error_code& ec) {
    ++accept_failures;
    int64_t now = absl::GetCurrentTimeNanos();
    if (now - accept_logged_ns >= 10'000'000'000) {
      ARDMA_LOG(kWarning, "accept: %s (%u failures in the last 10 s; retrying every %s)",
                ec.message(), accept_failures - accept_failures_logged,
                absl::FormatDuration(accept_pause));
      accept_logged_ns = now;
      accept_failures_logged = accept_failures;
    }
    // On the acceptor's own executor, where every accept completes: no other thread touches this.
    auto timer = std::make_shared<asio::steady_timer>(acceptor->get_executor(),
                                                      absl::ToChronoNanoseconds(accept_pause));
    accept_pause = std::min(accept_pause * 2, absl::Seconds(1));
    timer->async_wait([this, acceptor, timer](boost::system::error_code wait_ec) {
      if (wait_ec || !acceptor->is_open()) return;
      Accept(acceptor);
    });
  }

  // Accepts connections forever, handing them to the I/O threads in turn.
  template <typename Acceptor>
  void Accept(Acceptor* acceptor) {
    using Socket = typename Acceptor::protocol_type::socket;
    asio::io_context& io = *ios[next_io];
    acceptor->async_accept(io, [this, acceptor, &io](boost::system::error_code ec, Socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
        AcceptFailed(acceptor, ec);
        return;
      }
      next_io = (next_io + 1) % ios.size();
      accept_pause = absl::Milliseconds(10);  // accepting again: the next failure starts over
      if constexpr (std::is_same_v<Socket, tcp::socket>) {
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
      }
      handler->counters().connections_accepted.fetch_add(1, std::memory_order_relaxed);
      if constexpr (std::is_same_v<Socket, tcp::socket>) {
        if (tls != nullptr) {
          HandshakeThenServe(std::move(socket), io);
          Accept(acceptor);
          return;
        }
      }
      auto session = std::make_shared<Session<Socket>>(std::move(socket), io, *handler);
      if constexpr (std::is_same_v<Socket, local::socket>) {
        // The client process: its memfds may be registered (REGISTER).
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (::getsockopt(session->socket().native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) ==
            0) {
          session->auth().peer_pid = cred.pid;
        }
      }
      Serve(session);
      Accept(acceptor);
    });
  }

  template <typename Socket>
  void Serve(const std::shared_ptr<Session<Socket>>& session) {
    {
      absl::MutexLock lock(&mu);
      sessions.remove_if([](const std::weak_ptr<SessionBase>& w) { return w.expired(); });
      sessions.push_back(session);
    }
    session->Start();
  }

  // The TLS handshake (at most kTlsHandshakeTimeout), then a session over the TLS stream. With
  // mutual TLS, the client certificate's common name authenticates the connection.
  void HandshakeThenServe(tcp::socket socket, asio::io_context& io) {
    using TlsSocket = asio::ssl::stream<tcp::socket>;
    auto stream = std::make_shared<TlsSocket>(std::move(socket), *tls);
    auto timer = std::make_shared<asio::steady_timer>(io, kTlsHandshakeTimeout);
    timer->async_wait([stream](boost::system::error_code ec) {
      if (ec) return;  // the handshake finished first
      boost::system::error_code ignored;
      stream->lowest_layer().close(ignored);
    });
    stream->async_handshake(
        asio::ssl::stream_base::server, [this, stream, timer, &io](boost::system::error_code ec) {
          timer->cancel();
          if (ec) {
            handler->counters().auth_refused.fetch_add(1, std::memory_order_relaxed);
            ARDMA_LOG(kWarning, "TLS handshake failed: %s", ec.message());
            return;
          }
          auto session = std::make_shared<Session<TlsSocket>>(std::move(*stream), io, *handler);
          if (!options.tls_ca.empty()) {
            std::string name = PeerCommonName(session->socket().native_handle());
            handler->AuthenticateCertificate(*session, name);
          }
          Serve(session);
        });
  }

  void ScheduleExpiry() {
    expiry->expires_after(kExpiryPeriod);
    expiry->async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      handler->ExpireParked();
      ScheduleExpiry();
    });
  }
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.io_threads < 1) return absl::InvalidArgumentError("--io_threads must be at least 1");
  ARDMA_RETURN_IF_ERROR(ParseHostPort(options.listen).status());  // before the heap is made

  if (options.ucx != ServerOptions::Ucx::kOff) {
    absl::StatusOr<std::unique_ptr<UcxServer>> ucx = UcxServer::Create();
    if (ucx.ok()) {
      impl->ucx = *std::move(ucx);
    } else if (options.ucx == ServerOptions::Ucx::kOn) {
      return ucx.status();
    } else {
      ARDMA_LOG(kWarning, "UCX is off: %s", std::string(ucx.status().message()));
    }
  }
  std::unique_ptr<Region> heap;
  if (impl->ucx != nullptr && options.memory_file.empty()) {
    // Memory the transports can map, so clients' one-sided atomics need no server thread.
    absl::StatusOr<std::unique_ptr<Region>> shared = impl->ucx->AllocateRegion(options.memory_size);
    if (shared.ok()) {
      heap = *std::move(shared);
    } else {
      ARDMA_LOG(kWarning, "heap not in UCX memory (%s): one-sided atomics go through the server",
                std::string(shared.status().message()));
    }
  }
  if (heap == nullptr) {
    ARDMA_ASSIGN_OR_RETURN(
        heap, Region::Create({.size = options.memory_size, .file = options.memory_file}));
  }
  bool reopened = heap->reopened();
  uint64_t heap_size = heap->size();
  impl->regions.Add(std::move(heap));
  for (const std::shared_ptr<Region>& region : options.extra_regions) impl->regions.Add(region);
  {
    Execution ex;
    ex.regions = &impl->regions;
    LocalContext ctx(&ex);
    absl::StatusOr<bool> formatted =
        heap::FormatIfNeeded(ctx, heap_size, /*keep_existing=*/reopened && !options.format);
    if (!formatted.ok()) {
      return absl::Status(
          formatted.status().code(),
          absl::StrCat("memory file ", options.memory_file, ": ", formatted.status().message()));
    }
    if (reopened && *formatted) {
      ARDMA_LOG(kWarning, "formatted memory file %s (%u bytes): what it held is gone",
                options.memory_file, heap_size);
    }
    if (reopened && !*formatted) {
      ARDMA_LOG(kInfo, "reopened memory file %s (%u bytes), data kept", options.memory_file,
                heap_size);
    }
  }

  ARDMA_RETURN_IF_ERROR(CheckPlacement(options.io_cpus, options.realtime));
  impl->registry.SetLoader(wire::CodeKind::kNative, std::make_unique<NativeLoader>());
  if (std::unique_ptr<CodeLoader> jvm = NewJvmLoader(options.jvm)) {
    impl->registry.SetLoader(wire::CodeKind::kJvm, std::move(jvm));
  }
  if (!options.preload_dir.empty()) {
    ARDMA_RETURN_IF_ERROR(impl->registry.LoadDirectory(options.preload_dir));
  }
  impl->handler =
      std::make_unique<RequestHandler>(options.handler, &impl->regions, &impl->registry);
  if (impl->ucx != nullptr) {
    absl::Status started = impl->ucx->Start(impl->regions, impl->handler.get());
    if (!started.ok()) {
      if (options.ucx == ServerOptions::Ucx::kOn) return started;
      ARDMA_LOG(kWarning, "UCX is off: %s", std::string(started.message()));
      impl->ucx.reset();
    } else {
      impl->handler->SetUcxConnect(
          [ucx = impl->ucx.get()](std::string_view payload,
                                  const std::shared_ptr<ResponseSink>& sink) {
            return ucx->Connect(payload, sink);
          });
      impl->handler->SetRegionKeys(impl->ucx.get());
    }
  }

  for (int i = 0; i < options.io_threads; ++i) {
    impl->ios.push_back(std::make_unique<asio::io_context>(1));
    impl->guards.push_back(asio::make_work_guard(*impl->ios.back()));
  }
  // The sockets are bound by core/net (one place for every listener) and handed to Asio.
  ARDMA_ASSIGN_OR_RETURN(impl->tls, MakeTlsContext(options));
  ARDMA_ASSIGN_OR_RETURN(ListeningSocket tcp_socket, ListenSocket(options.listen));
  ARDMA_ASSIGN_OR_RETURN(impl->bound, ParseHostPort(tcp_socket.address));
  bool mutual_tls = !options.tls_ca.empty();
  if (options.handler.auth == nullptr && !mutual_tls && !options.insecure &&
      !IsLoopback(impl->bound.host)) {
    ::close(tcp_socket.fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", tcp_socket.address,
        " without authentication: anyone who can reach it could run code as this server's user; "
        "give --auth-file FILE (or --tls-ca for mutual TLS), listen on 127.0.0.1, or pass "
        "--insecure (docs/SECURITY.md)"));
  }
  {
    asio::io_context& io0 = *impl->ios[0];
    boost::system::error_code ec;
    impl->acceptor = std::make_unique<tcp::acceptor>(io0);
    tcp protocol = impl->bound.host.find(':') != std::string::npos ? tcp::v6() : tcp::v4();
    impl->acceptor->assign(protocol, tcp_socket.fd, ec);
    if (!ec && !options.unix_socket.empty()) {
      absl::StatusOr<ListeningSocket> unix_socket =
          ListenUnixSocket(options.unix_socket, options.unix_socket_mode);
      if (!unix_socket.ok()) return unix_socket.status();
      impl->unix_acceptor = std::make_unique<local::acceptor>(io0);
      impl->unix_acceptor->assign(local(), unix_socket->fd, ec);
    }
    if (ec) return absl::UnavailableError(absl::StrCat("listen: ", ec.message()));
  }
  impl->expiry = std::make_unique<asio::steady_timer>(*impl->ios[0]);
  impl->Accept(impl->acceptor.get());
  if (impl->unix_acceptor != nullptr) impl->Accept(impl->unix_acceptor.get());
  impl->ScheduleExpiry();
  // Each I/O thread names and places itself before it runs; Start returns once all have.
  absl::BlockingCounter placed(static_cast<int>(impl->ios.size()));
  for (size_t i = 0; i < impl->ios.size(); ++i) {
    int cpu = options.io_cpus.empty() ? -1 : options.io_cpus[i % options.io_cpus.size()];
    impl->threads.emplace_back(
        [io = impl->ios[i].get(), i, cpu, realtime = options.realtime, &placed] {
          // Checked by CheckPlacement before any thread started, so these succeed.
          ::pthread_setname_np(::pthread_self(), absl::StrCat("ardma-io-", i).c_str());
          if (cpu >= 0) PinToCpu(cpu).IgnoreError();
          if (realtime) MakeRealtime().IgnoreError();
          placed.DecrementCount();
          io->run();
        });
  }
  placed.Wait();
  ARDMA_LOG(kInfo, "ardmad listening on %s%s%s, heap %u bytes%s, %d I/O threads, %d workers, %s%s",
            impl->tls != nullptr ? "tls://" : "", impl->bound.ToString(),
            options.unix_socket.empty() ? "" : absl::StrCat(" and unix:", options.unix_socket),
            heap_size, options.memory_file.empty() ? "" : absl::StrCat(" in ", options.memory_file),
            options.io_threads, options.handler.workers,
            impl->ucx != nullptr ? "UCX on (ucx://)" : "UCX off",
            options.handler.auth != nullptr ? ", authentication required"
            : !options.tls_ca.empty()       ? ", client certificates required"
                                            : "");
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

uint16_t Server::port() const { return impl_->bound.port; }
std::string Server::address() const { return impl_->bound.ToString(); }
const std::string& Server::unix_socket() const { return impl_->options.unix_socket; }
RegionTable& Server::regions() { return impl_->regions; }
CodeRegistry& Server::registry() { return impl_->registry; }
RequestHandler& Server::handler() { return *impl_->handler; }
UcxServer* Server::ucx() { return impl_->ucx.get(); }

void Server::Stop() {
  std::list<std::weak_ptr<SessionBase>> sessions;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    sessions = impl_->sessions;
  }
  asio::post(*impl_->ios[0], [impl = impl_.get()] {
    boost::system::error_code ignored;
    impl->acceptor->close(ignored);
    if (impl->unix_acceptor != nullptr) impl->unix_acceptor->close(ignored);
    impl->expiry->cancel();
  });
  if (impl_->ucx != nullptr) impl_->ucx->Stop();  // unmaps registered regions' keys too
  impl_->handler->SetRegionKeys(nullptr);
  impl_->handler->Stop();
  for (auto& weak : sessions) {
    if (auto session = weak.lock()) session->Shutdown();
  }
  impl_->guards.clear();
  // Let the close handlers run, then stop whatever is left (sessions blocked in reads).
  for (auto& io : impl_->ios) {
    asio::post(*io, [io = io.get()] { io->stop(); });
  }
  for (auto& t : impl_->threads) t.join();
  if (!impl_->options.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::remove(impl_->options.unix_socket, ignored);
  }
  impl_->done.Notify();
  ARDMA_LOG(kInfo, "ardmad stopped");
}

void Server::Wait() { impl_->done.WaitForNotification(); }

}  // namespace ardma
