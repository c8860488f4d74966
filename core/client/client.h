// Client: the application's handle on one ardmad. Typed synchronous calls, asynchronous calls,
// batches (several operations, one round trip) and pipelining over a managed connection.
//
//   ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<ardma::Client> client,
//                          ardma::Client::Connect("127.0.0.1:15712"));
//   ARDMA_RETURN_IF_ERROR(client->Write(addr, "hello"));
//   ARDMA_ASSIGN_OR_RETURN(std::string bytes, client->Read(addr, 5));
//   ARDMA_ASSIGN_OR_RETURN(auto result, client->Batch().Read(a, 8).Read(b, 8).Send());
//
// Connection management (the rdistcc paper): the connection is kept open and reused; when it breaks the
// next call reconnects with exponential backoff. Calls that are safe to repeat (PING, READ, LOAD,
// HAS_CODE, STATS, and WRITE and EXECUTE, which the server de-duplicates by (client id, request
// id), so a retried write never lands over newer data) are retried on a new connection within
// their timeout; CAS and FETCH_ADD are not (they may have been applied), and neither is a WRITE
// made one-sidedly over UCX (the server never saw it, so it cannot recognise it again): those
// fail with UNAVAILABLE. UNAVAILABLE otherwise means the server is really gone.
// Asynchronous calls (CallAsync, ExecuteAsync) are not retried: their callback gets UNAVAILABLE.
//
// Thread-safe: any number of threads may share one Client; their calls are pipelined on one
// connection. Asynchronous callbacks run on a client thread and must not block on further
// synchronous calls of the same Client.
#ifndef ARDMA_CORE_CLIENT_CLIENT_H_
#define ARDMA_CORE_CLIENT_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/client/connection.h"
#include "core/client/keep_alive.h"
#include "core/context/context.h"
#include "core/wire/messages.h"

namespace ardma {

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(30);         // default per-call timeout
  absl::Duration connect_timeout = absl::Seconds(5);  // per connection attempt
  int connect_attempts = 5;                           // before UNAVAILABLE
  absl::Duration backoff_initial = absl::Milliseconds(10);
  absl::Duration backoff_max = absl::Seconds(1);
  wire::WireLimits limits;
  uint64_t client_id = 0;  // 0: a random id (identifies retries to the server)
  // Experiments only: every synchronous flight (one round trip in counters()) takes at least this
  // much longer, as if the network's round trip were longer. It is how the latency sweep puts a
  // longer network under transports a delaying proxy cannot sit in (UCX shared memory); over TCP
  // ardma-delay-proxy does the same outside the client. Async calls are not delayed.
  absl::Duration extra_round_trip_time = absl::ZeroDuration();
  // Who to authenticate as (docs/SECURITY.md). Unset: the file $ARDMA_AUTH_FILE names, if any
  // (unless credentials_from_environment is false); with neither, no authentication.
  std::optional<security::Credentials> credentials;
  bool credentials_from_environment = true;
  // For "tls://HOST:PORT" addresses: whom to trust, and this client's certificate for mutual TLS
  // (empty fields come from $ARDMA_TLS_CA, $ARDMA_TLS_CERT, $ARDMA_TLS_KEY).
  TlsOptions tls;
};

// `options` with the credentials of `auth_file` (a private file whose first line is NAME SECRET;
// docs/SECURITY.md); an empty path leaves them to $ARDMA_AUTH_FILE. For tools' --auth-file.
absl::StatusOr<ClientOptions> OptionsWithAuthFile(const std::string& auth_file,
                                                  ClientOptions options = {});

struct CallOptions {
  absl::Duration timeout = absl::ZeroDuration();  // zero: the client's default
  // The deadline an EXECUTE gives the server (zero: `timeout`). Shorter than `timeout` for a
  // function that parks, so that the server's answer (DEADLINE_EXCEEDED included) arrives before
  // the client stops listening, and nothing the function did is answered to nobody.
  absl::Duration server_deadline = absl::ZeroDuration();
  // Running it twice does no harm (a read): the request goes without the client's id, so the
  // server keeps no record of it for de-duplicating a retry, and a retry simply runs again.
  bool idempotent = false;
  // An EXECUTE made by a member of a cluster for active code on it (Context::CallPeer): it carries
  // wire::kFlagPeer, which the callee accepts only from a connection with the `peer` permission.
  bool peer = false;
  // With `peer`: the EXECUTE applies the calling primary's replicated write (wire::kFlagReplica).
  bool replica = false;
  // A read that a replica of its slot may answer, maybe a little behind its primary
  // (wire::kFlagStaleRead; --read-from-replica).
  bool stale_read = false;
};

class Client;

// Operations collected and sent as one flight: one round trip. Runs of consecutive reads and of
// consecutive writes become one READ / WRITE frame each; the server applies the frames in order.
class Batch {
 public:
  struct Result {
    std::vector<std::string> reads;    // one per Read, in order
    std::vector<CasResult> cas;        // one per CompareAndSwap, in order
    std::vector<uint64_t> fetch_adds;  // old values, one per FetchAdd, in order
  };

  Batch& Read(uint64_t addr, uint32_t len, RegionId region = kHeapRegion);
  Batch& Write(uint64_t addr, std::string_view data, RegionId region = kHeapRegion);
  Batch& CompareAndSwap(uint64_t addr, uint64_t expected, uint64_t desired,
                        RegionId region = kHeapRegion);
  Batch& FetchAdd(uint64_t addr, uint64_t delta, RegionId region = kHeapRegion);
  // Sends everything and waits. The first failing frame's status is returned.
  absl::StatusOr<Result> Send(const CallOptions& options = {});

 private:
  friend class Client;
  explicit Batch(Client* client) : client_(client) {}
  enum class Kind { kRead, kWrite, kCas, kFetchAdd };
  struct Op {
    Kind kind;
    RegionId region;
    uint64_t addr;
    uint32_t len = 0;
    std::string data;
    uint64_t a = 0, b = 0;
  };
  Client* client_;
  std::vector<Op> ops_;
};

class Client {
 public:
  // Connects to "host:port", or to "unix:/path" for a server's --unix-socket on this host; with
  // the prefix "ucx://" (ucx://host:port, ucx://unix:/path) over UCX: READ, WRITE, CAS and
  // FETCH_ADD become one-sided operations where the transport allows (ucx_connection.h), the rest
  // active messages, bootstrapped over that same listener. UNAVAILABLE if no connection can be
  // made; FAILED_PRECONDITION if the server does not offer UCX.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(std::string_view address,
                                                         const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  absl::Status Ping(const CallOptions& options = {});
  // PING with a payload; returns the echo.
  absl::StatusOr<std::string> Echo(std::string_view payload, const CallOptions& options = {});

  absl::StatusOr<std::string> Read(uint64_t addr, uint32_t len, RegionId region = kHeapRegion,
                                   const CallOptions& options = {});
  // The READs of `ops`, each into its buffer, in one round trip: straight into them where the
  // transport reads on this thread (UCX's one-sided READ: no copy, no allocation), else as one
  // Batch. The first READ's failure (e.g. OUT_OF_RANGE past a region's end) fails them all.
  absl::Status ReadInto(std::span<const ReadOp> ops, const CallOptions& options = {});
  absl::Status Write(uint64_t addr, std::string_view data, RegionId region = kHeapRegion,
                     const CallOptions& options = {});
  absl::StatusOr<CasResult> CompareAndSwap(uint64_t addr, uint64_t expected, uint64_t desired,
                                           RegionId region = kHeapRegion,
                                           const CallOptions& options = {});
  absl::StatusOr<uint64_t> FetchAdd(uint64_t addr, uint64_t delta, RegionId region = kHeapRegion,
                                    const CallOptions& options = {});

  // Ships code; returns its hash. A no-op on the server if the hash is known.
  // `deps`: the libraries the code was built against; its calls of their functions resolve to
  // exactly those versions on the server (docs/SECURITY.md).
  absl::StatusOr<wire::CodeHash> Load(wire::CodeKind kind, std::string_view library_name,
                                      std::string_view code, const CallOptions& options = {},
                                      std::vector<wire::CodeHash> deps = {});
  absl::StatusOr<bool> HasCode(const wire::CodeHash& hash, const CallOptions& options = {});
  // Runs a function by name (the newest library exporting it) or by library hash + name.
  absl::StatusOr<std::string> Execute(std::string_view function, std::string_view args,
                                      const CallOptions& options = {});
  absl::StatusOr<std::string> Execute(const wire::CodeHash& library, std::string_view function,
                                      std::string_view args, const CallOptions& options = {});
  std::future<absl::StatusOr<std::string>> ExecuteAsync(std::string_view function,
                                                        std::string_view args,
                                                        const CallOptions& options = {});
  // By library hash + name, like Execute's second form.
  std::future<absl::StatusOr<std::string>> ExecuteAsync(const wire::CodeHash& library,
                                                        std::string_view function,
                                                        std::string_view args,
                                                        const CallOptions& options = {});
  // The same with a callback instead of a future: `done` runs on a client thread and may issue
  // the next asynchronous call (a closed loop with no thread hand-off).
  void ExecuteAsync(std::string_view function, std::string_view args, ResponseCallback done,
                    const CallOptions& options = {});
  absl::StatusOr<std::vector<wire::StatsEntry>> Stats(const CallOptions& options = {});

  // Registers a file under the server's --register-dir (a path the server can open: it must be
  // on the server's host) or one of this process's memfds (created with MFD_ALLOW_SEALING; over
  // a Unix-socket connection only; the server seals it against shrinking) as a new region that
  // other clients may READ, and WRITE if `writable`. `size` 0: the file's size. The region lives
  // until Deregister or until this client's connection closes; it is never re-registered after
  // a reconnect. Returns its id and bounds (and its UCX key).
  absl::StatusOr<wire::UcxRegionKey> RegisterFile(std::string_view path, bool writable,
                                                  uint64_t size = 0,
                                                  const CallOptions& options = {});
  absl::StatusOr<wire::UcxRegionKey> RegisterMemfd(int fd, bool writable, uint64_t size = 0,
                                                   const CallOptions& options = {});
  absl::Status Deregister(RegionId region, const CallOptions& options = {});
  // Any region's bounds (REGION_INFO).
  absl::StatusOr<wire::UcxRegionKey> RegionInfo(RegionId region, const CallOptions& options = {});
  // Over UCX, the first one-sided access to a region registered at run time fetches its key (one
  // extra round trip, on the bootstrap connection); this drops it once done with the region.
  void ForgetRegion(RegionId region);

  // Sends one request (with header `flags`) without waiting; `done` gets the response payload or
  // status.
  void CallAsync(wire::Op op, std::string payload, ResponseCallback done,
                 const CallOptions& options = {}, uint16_t flags = 0);

  class Batch Batch() {
    return ::ardma::Batch(this);
  }

  ClientCounters& counters() { return counters_; }
  // What carries this client's requests now (see Transport::Describe); connects if need be.
  absl::StatusOr<std::string> TransportDescription();
  uint64_t client_id() const { return client_id_; }
  // When a call made now with `options` gives up.
  absl::Time DeadlineFor(const CallOptions& options) const;
  // How long a call made with `options` may take (DeadlineFor's, from now).
  absl::Duration TimeoutFor(const CallOptions& options) const;
  // The lock owner the server gave the connection requests go over now (connecting if need be;
  // anonymous if it cannot): locks taken through this client are its connection's, and are
  // taken over by others only once that connection is gone (LockOwner in core/context/context.h).
  LockOwner lock_owner();
  // The server's --idle-timeout (zero: none, or unreachable). This client keeps its connection
  // alive with a PING every third of it; a holder of leased things (`ardma lock`) must not count
  // on the connection beyond that long after its last answered call.
  absl::Duration idle_timeout();
  const std::string& address() const { return address_; }

  // Gives up on the server for the calls under way (a cluster member etcd dropped: stopped, cut
  // off, dead): its connection is closed, and every call waiting on it fails at once with
  // UNAVAILABLE saying `why` instead of being retried or waiting out its timeout. A call made
  // later connects anew.
  void Abandon(std::string why);

  // Remembers that a library's code is on the server (used by EnsureLoaded); forgotten when the
  // client reconnects, since the server may have restarted.
  bool KnownLoaded(const wire::CodeHash& hash);
  void MarkLoaded(const wire::CodeHash& hash);
  void ForgetLoaded();

 private:
  // ExecuteAsync by name (`library` null) or by hash, answering through `done`.
  void SendExecute(const wire::CodeHash* library, std::string_view function,
                   std::string_view args, ResponseCallback done, const CallOptions& options);
  // The same answering through a future.
  std::future<absl::StatusOr<std::string>> FutureExecute(const wire::CodeHash* library,
                                                         std::string_view function,
                                                         std::string_view args,
                                                         const CallOptions& options);
  friend class ::ardma::Batch;
  Client(std::string address, const ClientOptions& options);

  // One flight with retries on a new connection when `retryable`; the responses in `results` (as
  // many as `requests`). `first_connection`, if given, is the first attempt's (the caller has just
  // looked it up).
  absl::Status Flight(absl::Span<const OutgoingRequest> requests, const CallOptions& options,
                      bool retryable, absl::Span<ResponsePayload> results,
                      std::shared_ptr<Transport> first_connection = nullptr);
  absl::StatusOr<std::string> Call(wire::Op op, std::string payload, const CallOptions& options,
                                   bool retryable);
  absl::StatusOr<std::string> Call(OutgoingRequest request, const CallOptions& options,
                                   bool retryable);
  absl::StatusOr<std::shared_ptr<Transport>> CurrentConnection();
  // `conn`'s DirectReads: true with *answer set; false where the READs must go as a flight (also
  // when the transport broke: the flight connects anew); or another failure of the transport.
  absl::StatusOr<bool> DirectReads(Transport& conn, std::span<const ReadOp> ops,
                                   const CallOptions& options, absl::Status* answer);
  // UNAVAILABLE with Abandon's reason.
  absl::Status AbandonedError();
  // The deadline an EXECUTE carries (CallOptions::server_deadline).
  absl::Duration ServerDeadline(const CallOptions& options) const;

  const std::string address_;
  const ClientOptions options_;
  const uint64_t client_id_;
  std::atomic<uint64_t> next_request_id_{1};
  ClientCounters counters_;

  absl::Mutex mu_;
  std::shared_ptr<Transport> connection_ ABSL_GUARDED_BY(mu_);
  // Keeps connection_ alive where the server closes idle connections; goes before it.
  std::unique_ptr<KeepAlive> keepalive_ ABSL_GUARDED_BY(mu_);
  bool connected_once_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<wire::CodeHash> loaded_ ABSL_GUARDED_BY(mu_);
  // Abandon's: how many times, and the last reason (a call that began before an Abandon is not
  // retried after it).
  std::atomic<uint64_t> abandoned_{0};
  std::string abandoned_why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_CLIENT_H_
