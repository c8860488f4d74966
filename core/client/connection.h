// Connection: the TCP (or Unix-socket) Transport: one connection to ardmad, shared by any number
// of threads, with pipelining.
//
// Requests are written whole under a write lock; responses may come back in any order and are
// matched by request id. Whoever waits reads: a thread waiting for its response takes the reader
// role if nobody has it, reads and dispatches every response that arrives (its own and others'),
// and hands the role on when its own has come. A synchronous call on an idle connection therefore
// costs one send(2) and one recv(2) on the caller's thread, with no thread hand-off. Asynchronous
// calls are completed by whichever thread reads; when no caller is waiting, a background reader
// thread (started on the first asynchronous call) reads for them.
//
// Once broken (peer closed, I/O error, protocol error) a Connection stays broken: every pending and
// later call fails with UNAVAILABLE and the owner makes a new one.
//
// Ownership: shared. The background reader holds a reference while it runs, so a callback may drop
// every other reference safely; it stops once the connection is broken or Close()d, so an owner
// that is done with a connection calls Close().
// Thread-safe. The header is free of socket types on purpose.
#ifndef ARDMA_CORE_CLIENT_CONNECTION_H_
#define ARDMA_CORE_CLIENT_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/client/byte_stream.h"
#include "core/client/call_table.h"
#include "core/client/transport.h"
#include "core/security/auth.h"
#include "core/wire/frame.h"
#include "core/wire/frame_reader.h"

namespace ardma {

// The client's side of the handshake (core/security/auth.h) on a freshly connected, blocking
// socket: reads HELLO and, if the server asks for it, authenticates (one round trip, counted in
// `counters` if given). Nothing to do when the server does not ask. For programs that speak the
// protocol on their own sockets; Connection::Open does this itself.
absl::Status AuthenticateSocket(int fd, const security::Credentials& credentials,
                                const wire::WireLimits& limits, ClientCounters* counters);
// `hello`, if given, gets the server's HELLO.
absl::Status AuthenticateStream(ByteStream& stream, const security::Credentials* credentials,
                                const wire::WireLimits& limits, ClientCounters* counters,
                                wire::Hello* hello = nullptr);

inline constexpr std::string_view kTlsPrefix = "tls://";

class Connection : public Transport, public std::enable_shared_from_this<Connection> {
 public:
  // Connects to "host:port" (TCP, with a timeout) or "unix:/path" (a Unix-domain socket) and,
  // given credentials, authenticates (one round trip; docs/SECURITY.md). UNAVAILABLE if the
  // server cannot be reached; INVALID_ARGUMENT for a malformed address; UNAUTHENTICATED if the
  // server refuses the credentials. Without credentials a server that requires them answers
  // every request UNAUTHENTICATED and closes the connection.
  // "tls://host:port" speaks TLS (byte_stream.h), verifying the server against `tls`.
  static absl::StatusOr<std::shared_ptr<Connection>> Open(
      std::string_view address, absl::Duration timeout, const wire::WireLimits& limits,
      ClientCounters* counters, const security::Credentials* credentials = nullptr,
      const TlsOptions& tls = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Transport (transport.h). RoundTrip sends a flight's frames in one write.
  std::string Describe() const override { return "a TCP or Unix-domain stream connection"; }
  absl::Status RoundTrip(absl::Span<const OutgoingRequest> requests,
                         absl::Span<const uint64_t> request_ids, uint64_t client_id,
                         LazyDeadline& deadline, absl::Span<ResponsePayload> results) override;
  void Async(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
             absl::Time deadline, ResponseCallback done) override;
  bool broken() const override;
  LockOwner lock_owner() const override { return owner_; }
  absl::Duration idle_timeout() const override { return idle_timeout_; }
  void KeepAlive(uint64_t request_id) override;
  // Fails pending calls with UNAVAILABLE and lets the background reader finish.
  void Close() override;
  // Waits up to `timeout` (InfiniteDuration: until something happens; Close wakes it) for the
  // peer to close the connection while nobody reads it, and breaks it if so; returns whether it
  // is broken. For transports that use this connection only to stay bound to the server (UCX).
  bool WaitForClose(absl::Duration timeout);

 private:
  explicit Connection(int fd, const wire::WireLimits& limits, ClientCounters* counters);

  absl::Status Send(std::string_view bytes);
  // Async; `counted` in round_trips and requests (else in keepalives).
  void SendAsync(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                 absl::Time deadline, ResponseCallback done, bool counted);
  // The reader's step (CallTable::Step): one recv, within the socket's receive timeout, and
  // the dispatch of every complete response.
  void ReadOnce();
  void Dispatch(const wire::FrameHeader& header, std::string_view payload);
  void Break(const absl::Status& status);

  const int fd_;
  std::unique_ptr<ByteStream> tls_;  // set for tls:// (then it owns fd_)
  const wire::WireLimits limits_;
  ClientCounters* const counters_;
  LockOwner owner_;              // from the server's HELLO
  absl::Duration idle_timeout_;  // likewise
  absl::Mutex write_mu_;

  CallTable calls_;
  std::once_flag background_started_;
  std::thread background_;  // reads for asynchronous calls; started on the first one

  wire::FrameReader reader_;  // used by whoever holds the reader role
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_CONNECTION_H_
