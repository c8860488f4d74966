#include "core/client/connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/host_port.h"
#include "core/net/socket_connect.h"
#include "core/security/auth.h"
#include "core/status_macros.h"
#include "core/wire/messages.h"

namespace ardma {
namespace {

// A reader blocked in recv(2) wakes this often to check deadlines.
constexpr int kReadTickMs = 100;
// Reads one whole frame (blocking, within the socket's receive timeout).
absl::StatusOr<wire::OwnedFrame> ReadFrame(ByteStream& stream, const wire::WireLimits& limits) {
  return wire::ReadFrame([&](char* out, size_t n) { return stream.RecvExactly(out, n); }, limits);
}

}  // namespace

absl::Status AuthenticateSocket(int fd, const security::Credentials& credentials,
                                const wire::WireLimits& limits, ClientCounters* counters) {
  return AuthenticateStream(*PlainStream(fd, /*owned=*/false), &credentials, limits, counters);
}

absl::Status AuthenticateStream(ByteStream& stream, const security::Credentials* credentials_or,
                                const wire::WireLimits& limits, ClientCounters* counters,
                                wire::Hello* hello_out) {
  ARDMA_ASSIGN_OR_RETURN(auto hello_frame, ReadFrame(stream, limits));
  if (hello_frame.header.op != wire::Op::kHello) {
    return absl::DataLossError("the server did not open with HELLO (not an ardmad?)");
  }
  ARDMA_ASSIGN_OR_RETURN(wire::Hello hello, wire::DecodeHello(hello_frame.payload));
  if (hello_out != nullptr) *hello_out = hello;
  // Without credentials, a server that asks for them refuses every request (saying why).
  if (!hello.auth_required || credentials_or == nullptr) return absl::OkStatus();
  const security::Credentials& credentials = *credentials_or;
  wire::AuthRequest req{.name = credentials.name, .client_nonce = security::RandomNonce()};
  req.proof = security::ComputeProof(credentials.secret, security::Role::kClient, hello.nonce,
                                     req.client_nonce, credentials.name);
  std::string frame;
  size_t start = wire::BeginFrame(&frame);
  wire::EncodeAuthRequest(req, &frame);
  wire::FinishFrame({.op = wire::Op::kAuth, .request_id = 0}, start, &frame);
  ARDMA_RETURN_IF_ERROR(stream.SendAll(frame));
  ARDMA_ASSIGN_OR_RETURN(auto answer, ReadFrame(stream, limits));
  if (counters != nullptr) {
    counters->round_trips.fetch_add(1, std::memory_order_relaxed);
    counters->bytes_sent.fetch_add(frame.size(), std::memory_order_relaxed);
  }
  if (answer.header.status != 0) {
    return wire::StatusFromWire(answer.header.status, answer.payload);
  }
  ARDMA_ASSIGN_OR_RETURN(wire::AuthResponse resp, wire::DecodeAuthResponse(answer.payload));
  security::Proof expected = security::ComputeProof(
      credentials.secret, security::Role::kServer, hello.nonce, req.client_nonce, credentials.name);
  if (!security::ProofsEqual(expected, resp.proof)) {
    return absl::UnauthenticatedError(
        "the server could not prove it knows this secret (not the ardmad you meant?)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Connection>> Connection::Open(
    std::string_view address, absl::Duration timeout, const wire::WireLimits& limits,
    ClientCounters* counters, const security::Credentials* credentials, const TlsOptions& tls) {
  bool use_tls = address.substr(0, kTlsPrefix.size()) == kTlsPrefix;
  if (use_tls) address.remove_prefix(kTlsPrefix.size());
  std::string host;
  if (use_tls) {
    ARDMA_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
    host = hp.host;
  }
  ARDMA_ASSIGN_OR_RETURN(int fd, ConnectSocket(address, timeout));
  std::unique_ptr<ByteStream> tls_stream;
  if (use_tls) {
    ARDMA_ASSIGN_OR_RETURN(tls_stream, TlsStream(fd, host, tls.WithEnvironment(), timeout));
  }
  // The greeting (and, with credentials, authentication) before anything else.
  wire::Hello hello;
  {
    std::unique_ptr<ByteStream> plain;
    ByteStream* stream = tls_stream.get();
    if (stream == nullptr) {
      plain = PlainStream(fd, /*owned=*/false);
      stream = plain.get();
    }
    stream->SetRecvTimeout(timeout);
    if (absl::Status s = AuthenticateStream(*stream, credentials, limits, counters, &hello);
        !s.ok()) {
      if (tls_stream == nullptr) ::close(fd);
      if (absl::IsUnavailable(s)) {
        return absl::UnavailableError(absl::StrCat(
            credentials != nullptr ? "authenticating to " : "waiting for the greeting of ",
            std::string(address), ": ", s.message()));
      }
      return s;
    }
  }
  // A receive timeout, so a reader blocked in recv(2) can check deadlines.
  timeval tick{0, kReadTickMs * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));
  std::shared_ptr<Connection> c(new Connection(fd, limits, counters));
  c->tls_ = std::move(tls_stream);
  c->owner_ = {hello.owner_token, hello.owner_table};
  c->idle_timeout_ = absl::Milliseconds(hello.idle_timeout_ms);
  return c;
}

Connection::Connection(int fd, const wire::WireLimits& limits, ClientCounters* counters)
    : fd_(fd), limits_(limits), counters_(counters), reader_(limits) {}

Connection::~Connection() {
  Close();
  // The reader holds a reference while it runs, so if it is still around this destructor is its
  // last act (it dropped the last reference): the thread ends by itself.
  JoinUnlessSelf(background_);
  if (tls_ != nullptr) {
    tls_.reset();  // closes fd_
  } else {
    ::close(fd_);
  }
}

void Connection::Close() {
  calls_.Close();
  ::shutdown(fd_, SHUT_RDWR);
}

bool Connection::broken() const { return !calls_.failure().ok(); }

bool Connection::WaitForClose(absl::Duration timeout) {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  int ms = timeout == absl::InfiniteDuration()
               ? -1
               : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(timeout), INT32_MAX));
  int n = ::poll(&p, 1, ms);
  if (n > 0) {
    // The server never speaks unasked on such a connection: anything readable is its close (or
    // a protocol error, which ends the session as well).
    char byte;
    ssize_t got = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got == 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      Break(absl::UnavailableError("connection closed by the server"));
    } else if (got < 0 && errno != EAGAIN && errno != EINTR) {
      Break(ErrnoUnavailable("recv", errno));
    } else if (got > 0) {
      Break(absl::UnavailableError("unexpected data from the server"));
    }
  }
  return broken();
}

ResponsePayload ResponseFromFrame(const wire::FrameHeader& header, std::string_view payload) {
  return header.status == 0 ? ResponsePayload(std::string(payload))
                            : ResponsePayload(wire::StatusFromWire(header.status, payload));
}

absl::Status Connection::Send(std::string_view bytes) {
  absl::MutexLock lock(&write_mu_);
  if (tls_ != nullptr) {
    ARDMA_RETURN_IF_ERROR(tls_->SendAll(bytes));
    counters_->bytes_sent.fetch_add(bytes.size(), std::memory_order_relaxed);
    return absl::OkStatus();
  }
  ARDMA_RETURN_IF_ERROR(SendAll(fd_, bytes));
  counters_->bytes_sent.fetch_add(bytes.size(), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Connection::RoundTrip(absl::Span<const OutgoingRequest> requests,
                                   absl::Span<const uint64_t> request_ids, uint64_t client_id,
                                   LazyDeadline& deadline, absl::Span<ResponsePayload> results) {
  std::string out;
  for (size_t i = 0; i < requests.size(); ++i) {
    AppendFrame(requests[i], request_ids[i], client_id, &out);
  }
  CallTable::Expected expected(request_ids);
  ARDMA_RETURN_IF_ERROR(calls_.Expect(expected));
  counters_->round_trips.fetch_add(1, std::memory_order_relaxed);
  counters_->requests.fetch_add(requests.size(), std::memory_order_relaxed);
  if (absl::Status s = Send(out); !s.ok()) {
    Break(s);
    return s;
  }
  return calls_.Await(
      expected, deadline.Get(),
      [this] {
        ReadOnce();
        return true;
      },
      results);
}

void Connection::Async(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                       absl::Time deadline, ResponseCallback done) {
  SendAsync(request, request_id, client_id, deadline, std::move(done), /*counted=*/true);
}

void Connection::KeepAlive(uint64_t request_id) {
  SendAsync(
      {wire::Op::kPing, std::string()}, request_id, 0, absl::Now() + absl::Seconds(30),
      [](ResponsePayload) {}, /*counted=*/false);
}

void Connection::SendAsync(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                           absl::Time deadline, ResponseCallback done, bool counted) {
  std::string out;
  AppendFrame(request, request_id, client_id, &out);
  if (!calls_.ExpectAsync(request_id, deadline, std::move(done))) return;
  std::call_once(background_started_, [this] {
    background_ = std::thread([self = shared_from_this()] {
      self->calls_.ServeAsync(
          [&self] {
            self->ReadOnce();
            return true;
          },
          absl::Milliseconds(kReadTickMs));
    });
  });
  if (counted) {
    counters_->round_trips.fetch_add(1, std::memory_order_relaxed);
    counters_->requests.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters_->keepalives.fetch_add(1, std::memory_order_relaxed);
  }
  if (absl::Status s = Send(out); !s.ok()) Break(s);
}

void Connection::ReadOnce() {
  char* space = reader_.space();
  size_t room = reader_.space_size();
  ssize_t n;
  if (tls_ != nullptr) {
    absl::StatusOr<size_t> got = tls_->RecvSome(space, room, absl::Milliseconds(kReadTickMs));
    if (!got.ok()) {
      Break(got.status());
      return;
    }
    if (*got == 0) return;  // tick
    n = static_cast<ssize_t>(*got);
  } else {
    n = ::recv(fd_, space, room, 0);
  }
  if (n == 0) {
    Break(absl::UnavailableError("server closed the connection"));
    return;
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;  // tick
    Break(ErrnoUnavailable("recv", errno));
    return;
  }
  counters_->bytes_received.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  reader_.Commit(static_cast<size_t>(n));
  for (;;) {
    absl::StatusOr<std::optional<wire::Frame>> frame = reader_.Next();
    if (!frame.ok()) {
      Break(absl::UnavailableError(absl::StrCat("bad response frame: ", frame.status().message())));
      return;
    }
    if (!frame->has_value()) break;
    Dispatch((*frame)->header, (*frame)->payload);
  }
  reader_.Shrink();
}

void Connection::Dispatch(const wire::FrameHeader& header, std::string_view payload) {
  // The server's greeting (read by Open) answers no request.
  if (header.op == wire::Op::kHello) return;
  calls_.Complete(header.request_id, ResponseFromFrame(header, payload));
}

void Connection::Break(const absl::Status& status) {
  calls_.Break(status);
  ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace ardma
