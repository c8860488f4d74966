// Transport: how a Client's requests reach one ardmad — a TCP or Unix-socket Connection
// (connection.h), or UCX (ucx_connection.h: one-sided READ/WRITE/CAS/FETCH_ADD, the rest as active
// messages). The Client keeps one and replaces it when it breaks.
//
// Once broken a transport stays broken: every pending and later call fails with UNAVAILABLE.
// Thread-safe: any number of threads may call one transport.
#ifndef ARDMA_CORE_CLIENT_TRANSPORT_H_
#define ARDMA_CORE_CLIENT_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/clock.h"
#include "core/context/context.h"
#include "core/wire/frame.h"
#include "core/wire/messages.h"

namespace ardma {

// Counted by the client, per Client; tests assert on them.
struct ClientCounters {
  std::atomic<uint64_t> round_trips{0};  // flights: a call or a batch sent, then awaited
  std::atomic<uint64_t> requests{0};     // request frames sent (or one-sided operations)
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> keepalives{0};  // PINGs sent only to keep the connection from idling
  // Sends that waited for answers because the server's limit of requests in flight was reached
  // (UCX, whose sends the server cannot slow down as it does a stream's).
  std::atomic<uint64_t> window_waits{0};
};

// One request of a flight. The data operations (READ, WRITE, CAS, FETCH_ADD) carry their request
// as values in `data`: a transport that sends frames encodes them straight into its frame
// (AppendFrame), and UCX performs them one-sidedly without encoding anything. An EXECUTE made
// and waited for by one call may come as values too (its name and arguments the caller's, which
// outlive the call), encoded straight into the frame. Every other op comes encoded in `payload`.
struct OutgoingRequest {
  using Reads = absl::InlinedVector<wire::ReadEntry, 1>;
  // The data is the caller's and outlives the call.
  using Writes = absl::InlinedVector<wire::WriteEntry, 1>;
  using Data = std::variant<std::monostate, Reads, Writes, wire::CasRequest, wire::FetchAddRequest,
                            wire::ExecuteRequest>;

  wire::Op op;
  std::string payload;
  Data data;
  uint16_t flags = 0;  // header flags beyond the response bit (wire::kFlagPeer)
};

// Whether `request` is a data operation given as values: one a transport may perform itself
// (Transport::Direct).
inline bool IsDataOperation(const OutgoingRequest& request) {
  return !std::holds_alternative<std::monostate>(request.data) &&
         !std::holds_alternative<wire::ExecuteRequest>(request.data);
}

// For a connection's destructor: joins `thread`, or detaches it when the destructor runs on that
// very thread (a connection's last reference may go on one of its own threads, which then ends
// by itself). Nothing for a thread that is not joinable.
void JoinUnlessSelf(std::thread& thread);

// Appends `request` to `out` as one frame: header, then its payload or its encoded `data`.
void AppendFrame(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                 std::string* out);

// A response payload, or the error status the server answered with.
using ResponsePayload = absl::StatusOr<std::string>;
using ResponseCallback = std::function<void(ResponsePayload)>;

class Transport {
 public:
  virtual ~Transport() = default;

  // Sends all requests as one flight, with the given request ids, then waits until every response
  // has arrived or the deadline passes, and puts them in `results` (as many as `requests`). The
  // returned status is the transport's (UNAVAILABLE: it broke; DEADLINE_EXCEEDED: no answer in
  // time); the responses' are the server's. Requests are applied in order. A deadline given as a
  // timeout is read from the clock once the requests are sent, while the server works on them.
  virtual absl::Status RoundTrip(absl::Span<const OutgoingRequest> requests,
                                 absl::Span<const uint64_t> request_ids, uint64_t client_id,
                                 LazyDeadline& deadline, absl::Span<ResponsePayload> results) = 0;
  // RoundTrip of one request: its response, or the transport's failure.
  absl::StatusOr<std::string> RoundTripOne(const OutgoingRequest& request, uint64_t request_id,
                                           uint64_t client_id, absl::Time deadline);

  // Sends one request; `done` runs on some client thread when the response arrives, the deadline
  // passes or the transport breaks. Never blocks on the response.
  virtual void Async(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                     absl::Time deadline, ResponseCallback done) = 0;

  // One request done on the calling thread without a flight, where the transport can: UCX's
  // one-sided READ, WRITE, CAS and FETCH_ADD. True with the answer in *result (counted as one
  // round trip, as RoundTrip would); false, with nothing done, for a request that must go through
  // RoundTrip; or the transport's failure, as RoundTrip's outer status.
  // `timeout` counts from when it first waits, if it does.
  virtual absl::StatusOr<bool> Direct(const OutgoingRequest& request, absl::Duration timeout,
                                      ResponsePayload* result) {
    return false;
  }

  // READs done on the calling thread straight into the callers' buffers, where the transport
  // can (UCX's one-sided READ): no request, no copy, no allocation. True once done, with OK in
  // *answer and every ops[i].out filled, or with the refusal a server would have answered (bad
  // range or region) in *answer; counted as one round trip. False, with nothing done, where the
  // READs must go through RoundTrip; or the transport's failure, as RoundTrip's outer status.
  virtual absl::StatusOr<bool> DirectReads(std::span<const ReadOp> ops, absl::Duration timeout,
                                           absl::Status* answer) {
    return false;
  }
  // Whether DirectReads may do READs here (it can still answer false, for a region it has no
  // key for): a caller need not prepare buffers for a transport that never does.
  virtual bool ReadsDirectly() const { return false; }

  virtual bool broken() const = 0;
  // What carries the requests, for people: "tcp", or UCX's endpoint configuration (its lanes).
  virtual std::string Describe() const = 0;
  // Fails pending calls with UNAVAILABLE and stops any background thread.
  virtual void Close() = 0;
  // Drops what this transport keeps of a region registered at run time (its remote key), once
  // the caller is done with it; the next access looks it up again.
  virtual void ForgetRegion(wire::RegionId region) {}
  // The lock owner the server gave the connection (LockOwner in core/context/context.h).
  virtual LockOwner lock_owner() const = 0;
  // The server's --idle-timeout, from its HELLO (zero: none). A connection that sends nothing for
  // that long is closed and the locks it owns pass on, so its owner sends KeepAlive() at least
  // every third of it (Client does, from a thread of its own).
  virtual absl::Duration idle_timeout() const = 0;
  // Sends a PING whose answer nobody waits for, counted in ClientCounters::keepalives only.
  virtual void KeepAlive(uint64_t request_id) = 0;
  // Whether the server would recognise `request` sent again with the same ids (a WRITE or EXECUTE
  // it answers is de-duplicated by (client id, request id)), so a retry on a new connection
  // cannot apply it twice. One-sided operations never reach the server: false for those.
  virtual bool Deduplicated(const OutgoingRequest& request) const { return true; }
};

// The response a frame carries: its payload, or the error status and message it reports.
ResponsePayload ResponseFromFrame(const wire::FrameHeader& header, std::string_view payload);

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_TRANSPORT_H_
