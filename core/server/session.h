// Session: one client connection over a TCP, TLS or Unix-domain stream socket, as the server
// (server.cc) serves it: reads frames into the RequestHandler, writes answers in order, bounds what
// it queues (--max-queued) and how long a frame may take to arrive (--frame-timeout).
// Internal to core/server.
#ifndef ARDMA_CORE_SERVER_SESSION_H_
#define ARDMA_CORE_SERVER_SESSION_H_

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/server/request_handler.h"
#include "core/wire/frame_reader.h"

namespace ardma::server_detail {

namespace asio = boost::asio;
using asio::ip::tcp;

inline constexpr size_t kInitialReadBuffer = 64 << 10;
// How long a connection that is being closed (refused, or a malformed frame) waits for the answers
// to what it sent before.
inline constexpr std::chrono::seconds kDrainGrace{5};
// How often a connection paused by the server-wide queue limit looks whether it may go on.
inline constexpr std::chrono::milliseconds kServerLimitPoll{10};

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

// What the server keeps of a connection, whatever its socket type.
class SessionBase : public ResponseSink {
 public:
  // Closes from any thread.
  void Shutdown() override = 0;
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
        idle_timer_(executor_),
        peer_(PeerName(socket_)) {}

  void Start() {
    ARDMA_LOG(kDebug, "connection from %s opened", peer_);
    handler_.counters().Add(Stat::kConnectionsOpen, 1);
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
    if (!self->close_when_written_) {
      self->Close();
      co_return;
    }
    // A refused connection, or one that sent a malformed frame, closes once every request it sent
    // before is answered and written (Flush), or after kDrainGrace (a parked request, a client
    // that does not read).
    if (self->Drained()) {
      self->Close();
      co_return;
    }
    self->frame_timer_.expires_after(kDrainGrace);
    self->frame_timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec) self->Close();
    });
  }

  bool Drained() const { return !writing_ && queue_.empty() && inflight_ == 0; }

  asio::awaitable<void> Read() {
    wire::FrameReader reader(handler_.limits(), kInitialReadBuffer);
    uint64_t requests_at_last_read = 0;
    for (;;) {
      // Handle every complete frame in the buffer; their responses go out in one write.
      for (;;) {
        // Back-pressure: no more than the limit of unanswered requests (or of answers the
        // client has not taken), even when more frames are already buffered.
        if (reader.unread().size() >= wire::kHeaderSize && Full()) {
          Flush();
          co_await WaitForRoom();
          if (!Open()) co_return;
          continue;
        }
        absl::StatusOr<std::optional<wire::Frame>> frame = reader.Next();
        if (!frame.ok()) {
          ProtocolError(reader.unread().substr(0, wire::kHeaderSize), frame.status());
          co_return;
        }
        if (!frame->has_value()) break;  // the rest is part of a frame
        ++inflight_;
        ++requests_;
        handler_.Handle((*frame)->header, (*frame)->payload, shared_from_this());
        if (close_when_written_) co_return;  // refused: nothing more is read (Flush closes)
      }
      Flush();
      reader.Shrink();
      // Back-pressure: stop reading while too many requests are unanswered.
      auto paused_from = std::chrono::steady_clock::now();
      co_await WaitForRoom();
      if (!Open()) co_return;
      TimeFrame(!reader.empty(), requests_ != requests_at_last_read,
                std::chrono::steady_clock::now() - paused_from);
      requests_at_last_read = requests_;
      if (reader.empty()) TimeIdle();
      boost::system::error_code ec;
      char* space = reader.space();
      size_t n = co_await socket_.async_read_some(asio::buffer(space, reader.space_size()),
                                                  asio::redirect_error(asio::use_awaitable, ec));
      idle_timed_ = false;
      if (ec) co_return;
      reader.Commit(n);
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
      self->handler_.counters().Add(Stat::kProtocolErrors, 1);
      ARDMA_LOG(kWarning,
                "closing the connection from %s: a frame begun did not arrive whole in %u ms",
                self->peer_, self->handler_.limits().frame_timeout_ms);
      self->Close();
    });
  }

  // Called per request of the connection's UCX session, from its progress thread: read from the
  // kernel's tick (CLOCK_MONOTONIC_COARSE, what steady_clock reads finely: a stamp is at most a
  // tick, 1-4 ms, early, against idle limits of seconds), and written only when it moved, so a
  // busy session costs a read, not a shared cache line written per request.
  void Touch() override {
    timespec now;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    const int64_t ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
    if (touched_ns_.load(std::memory_order_relaxed) != ns) {
      touched_ns_.store(ns, std::memory_order_relaxed);
    }
  }

  // The idle limit (WireLimits::idle_timeout_ms), armed while the reader waits with no partial
  // frame. When it fires with requests still unanswered (parked) it waits again, and it counts
  // from the latest Touch (the connection's UCX session at work); otherwise the connection is
  // closed.
  void TimeIdle(std::chrono::steady_clock::time_point from = std::chrono::steady_clock::now()) {
    uint32_t timeout_ms = handler_.limits().idle_timeout_ms;
    if (timeout_ms == 0) return;
    idle_timed_ = true;
    idle_timer_.expires_at(from + std::chrono::milliseconds(timeout_ms));
    idle_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || !self->idle_timed_ || !self->Open()) return;
      if (self->inflight_ > 0) {
        self->TimeIdle();
        return;
      }
      std::chrono::steady_clock::time_point touched{
          std::chrono::steady_clock::duration(self->touched_ns_.load(std::memory_order_relaxed))};
      if (touched > self->idle_timer_.expiry() -
                        std::chrono::milliseconds(self->handler_.limits().idle_timeout_ms)) {
        self->TimeIdle(touched);
        return;
      }
      ARDMA_LOG(kDebug, "closing the connection from %s: idle for %u ms", self->peer_,
                self->handler_.limits().idle_timeout_ms);
      self->Close();
    });
  }

  // Too many requests unanswered, or too many answer bytes not yet taken by the client — by this
  // connection, or (with some of its own) by all of them together.
  bool Full() const {
    const wire::WireLimits& limits = handler_.limits();
    return inflight_ >= limits.max_inflight_per_connection ||
           queued_bytes_ >= limits.max_queued_bytes_per_connection || OverServerLimit();
  }
  bool OverServerLimit() const {
    return queued_bytes_ > 0 && handler_.counters().queued_bytes.load(std::memory_order_relaxed) >=
                                    handler_.limits().max_queued_bytes_total;
  }

  // Returns once the connection has room again (Enqueue and finished writes wake it) or closed.
  // Room made by other connections wakes nobody: over the server-wide limit it looks again
  // every kServerLimitPoll.
  asio::awaitable<void> WaitForRoom() {
    while (Full() && Open()) {
      boost::system::error_code ignored;
      resume_.expires_at(OverServerLimit() ? std::chrono::steady_clock::now() + kServerLimitPoll
                                           : asio::steady_timer::time_point::max());
      co_await resume_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }

  // The frame cannot be parsed: nothing more is read; the requests before it are answered, and
  // this one too if its header names a request, then the connection closes (ReadLoop).
  void ProtocolError(std::string_view raw, const absl::Status& status) {
    handler_.counters().Add(Stat::kProtocolErrors, 1);
    ARDMA_LOG(kDebug, "closing connection: %s", status.ToString());
    if (std::string answer = wire::ErrorResponseForHeader(raw, status); !answer.empty()) {
      handler_.counters().Add(Stat::kErrors, 1);
      ++inflight_;  // Enqueue counts an answer off
      Enqueue(std::move(answer));
    }
    close_when_written_ = true;
    Flush();
  }

  // `bytes` of queued answers are gone (written, or dropped at close).
  void Unqueue(uint64_t bytes) {
    bytes = std::min(bytes, queued_bytes_);
    queued_bytes_ -= bytes;
    handler_.counters().queued_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  }

  void Enqueue(std::string frame) {
    if (inflight_ > 0) --inflight_;
    if (inflight_ + 1 == handler_.limits().max_inflight_per_connection) resume_.cancel();
    if (!Open()) return;
    queued_bytes_ += frame.size();
    handler_.counters().queued_bytes.fetch_add(frame.size(), std::memory_order_relaxed);
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
                          self->Unqueue(f.size());
                        }
                        self->writing_frames_.clear();
                        if (was_full && !self->Full()) self->resume_.cancel();  // wake the reader
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->Flush();
                        if (self->close_when_written_ && self->Drained()) self->Close();
                      });
  }

  void Close() {
    if (!open_.exchange(false)) return;
    ARDMA_LOG(kDebug, "connection from %s closed after %u requests", peer_, requests_);
    handler_.counters().Subtract(Stat::kConnectionsOpen, 1);
    handler_.ConnectionClosed(this);
    boost::system::error_code ignored;
    socket_.lowest_layer().shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.lowest_layer().close(ignored);
    resume_.cancel();
    frame_timer_.cancel();
    idle_timer_.cancel();
    queue_.clear();
    Unqueue(queued_bytes_);
  }

  Socket socket_;
  asio::io_context::executor_type executor_;
  RequestHandler& handler_;
  asio::steady_timer resume_;       // wakes the reader when in-flight requests drop below the limit
  asio::steady_timer frame_timer_;  // TimeFrame
  asio::steady_timer idle_timer_;   // TimeIdle
  bool frame_timed_ = false;
  bool idle_timed_ = false;
  // Written on the session's thread; read by worker threads deciding whether to answer.
  std::atomic<bool> open_{true};
  // Touch(), from other threads: steady_clock ticks of the latest traffic that came another way.
  std::atomic<int64_t> touched_ns_{0};
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

}  // namespace ardma::server_detail

#endif  // ARDMA_CORE_SERVER_SESSION_H_
