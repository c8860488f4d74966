// UcxConnection: the UCX Transport (docs/transports.md). Opened on "ucx://HOST:PORT": it connects
// to that listener over TCP (or a Unix socket), sends UCX_CONNECT with its worker's address, and
// gets back the server's worker address, a session number and every region's remote key and
// bounds. Then:
//
//   - READ and WRITE are ucp_get / ucp_put on the region's key: one-sided wherever the transport
//     is (shared memory, CMA, verbs) — no server thread runs for them. A WRITE is complete at the
//     server (ucp_ep_flush) before it is acknowledged. Where the region is mapped into this
//     process (shared memory: ucp_rkey_ptr succeeds) they are copies to and from the mapping,
//     which is what UCX's shared-memory get and put do, without a request to track.
//   - CAS and FETCH_ADD on a mapped region are CPU atomics on the very words active code uses.
//     Elsewhere (CMA, TCP, a NIC whose atomics need not be coherent with the CPU's) they go to the
//     server as requests and are done there, atomically with active code.
//   - Every other request (PING, LOAD, HAS_CODE, EXECUTE, STATS) is an active message carrying the
//     same frame as on TCP; the response comes back as one.
//   - Bounds, alignment and read-only regions are checked here first, with the server's errors.
//   - A region the server gave no key for (this connection's secret may not write it: an rkey is
//     a mapping of the memory, docs/SECURITY.md) is accessed through the server, which checks.
//
// The TCP connection stays open for the session's life: the server ends the session (running its
// close hooks) when it closes, and a watcher thread here breaks the transport the moment the server
// closes it, before a one-sided write could land in the memory of a server that is gone.
// Thread-safe; waiting threads progress the worker themselves (no thread hand-off for synchronous
// calls); a background thread progresses it for asynchronous calls.
#ifndef ARDMA_CORE_CLIENT_UCX_CONNECTION_H_
#define ARDMA_CORE_CLIENT_UCX_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/client/call_table.h"
#include "core/client/connection.h"
#include "core/client/transport.h"
#include "core/clock.h"
#include "core/context/context.h"
#include "core/memory/region_bounds.h"
#include "core/ucx/ucx_context.h"
#include "core/wire/frame.h"

namespace ardma {

class UcxConnection : public Transport, public std::enable_shared_from_this<UcxConnection> {
 public:
  // `address` is the listener without the "ucx://" prefix: "host:port" or "unix:/path".
  // FAILED_PRECONDITION if the server does not offer UCX; UNAVAILABLE if it cannot be reached.
  static absl::StatusOr<std::shared_ptr<UcxConnection>> Open(
      std::string_view address, absl::Duration timeout, const wire::WireLimits& limits,
      ClientCounters* counters, const security::Credentials* credentials = nullptr);
  ~UcxConnection() override;
  UcxConnection(const UcxConnection&) = delete;
  UcxConnection& operator=(const UcxConnection&) = delete;

  absl::Status RoundTrip(absl::Span<const OutgoingRequest> requests,
                         absl::Span<const uint64_t> request_ids, uint64_t client_id,
                         LazyDeadline& deadline, absl::Span<ResponsePayload> results) override;
  void Async(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
             absl::Time deadline, ResponseCallback done) override;
  absl::StatusOr<bool> Direct(const OutgoingRequest& request, absl::Duration timeout,
                              ResponsePayload* result) override;
  absl::StatusOr<bool> DirectReads(std::span<const ReadOp> ops, absl::Duration timeout,
                                   absl::Status* answer) override;
  bool ReadsDirectly() const override { return true; }
  bool broken() const override;
  // Which regions take one-sided atomics, then the endpoint's lanes.
  std::string Describe() const override;
  LockOwner lock_owner() const override { return tcp_->lock_owner(); }
  absl::Duration idle_timeout() const override { return tcp_->idle_timeout(); }
  // A PING active message: the server counts the session's traffic for its bootstrap connection.
  void KeepAlive(uint64_t request_id) override;
  // False for one-sided WRITEs: a put that landed before the failure would be applied again.
  bool Deduplicated(const OutgoingRequest& request) const override {
    return request.op != wire::Op::kWrite || !Keyed(request);
  }
  void Close() override;
  void ForgetRegion(RegionId region) override;

  // Whether CAS and FETCH_ADD on `region` are one-sided (the region is mapped into this process).
  bool OneSidedAtomics(RegionId region) const;
  // The endpoint's configuration as UCX prints it (its lanes: which transports carry what).
  std::string EndpointInfo() const;
  // Whether the endpoint has peer error handling (UcxContext::HandlesPeerFailure).
  bool HandlesPeerFailure() const { return ucx_->HandlesPeerFailure(); }

 private:
  struct RemoteRegion {
    RegionBounds bounds;
    uint64_t base = 0;
    ucp_rkey_h rkey = nullptr;  // null: this connection may not access it one-sidedly
    // Where the region's byte 0 is mapped in this process (ucp_rkey_ptr works: shared memory),
    // else null. Accesses to a mapped region are loads, stores and CPU atomics on it: what UCX's
    // shared-memory transports do for a get, put or atomic, without a request to track.
    char* local = nullptr;
    bool mapped() const { return local != nullptr; }
  };
  // Requests handed to UCX and not yet complete.
  using Inflight = absl::InlinedVector<ucs_status_ptr_t, 4>;

  UcxConnection(const wire::WireLimits& limits, ClientCounters* counters)
      : limits_(limits), counters_(counters) {}
  absl::Status Bootstrap(std::string_view address, absl::Duration timeout,
                         const security::Credentials* credentials);

  // One READ, WRITE, CAS or FETCH_ADD done one-sidedly: true, with the server's answer in
  // *result; false, with nothing done, if a READ or WRITE names a region that has no key here
  // (the caller sends it to the server, which checks it as on TCP); or a transport failure.
  absl::StatusOr<bool> OneSided(const OutgoingRequest& request, LazyDeadline& deadline,
                                ResponsePayload* result);
  absl::StatusOr<bool> OneSidedRead(const OutgoingRequest::Reads& entries,
                                    LazyDeadline& deadline, ResponsePayload* result);
  // Direct's and DirectReads' common part: `op` run on this thread, unless the server is gone or
  // the transport broken, counted as one round trip if done.
  absl::StatusOr<bool> OnThisThread(absl::Duration timeout,
                                    absl::FunctionRef<absl::StatusOr<bool>(LazyDeadline&)> op);
  // The READs of `ops` into their buffers: as OneSidedRead, with a refusal in *answer.
  absl::StatusOr<bool> ReadInto(std::span<const ReadOp> ops, LazyDeadline& deadline,
                                absl::Status* answer);
  // ReadInto once the batch's count and `total` bytes have been checked against the limits.
  absl::StatusOr<bool> ReadChecked(std::span<const ReadOp> ops, uint64_t total,
                                   LazyDeadline& deadline, absl::Status* answer);
  absl::StatusOr<bool> OneSidedWrite(const OutgoingRequest::Writes& entries,
                                     LazyDeadline& deadline, ResponsePayload* result);
  absl::StatusOr<bool> OneSidedAtomic(const OutgoingRequest& request, LazyDeadline& deadline,
                                      ResponsePayload* result);
  // Waits for every request (a ucs_status_ptr_t each) and clears them; the first failure.
  absl::Status WaitAll(Inflight* requests, LazyDeadline& deadline, std::string_view what);
  // Whether `request` is tried one-sidedly: READ and WRITE given as values (OneSided sends those
  // naming a region without a key to the server), CAS and FETCH_ADD on a mapped region.
  bool IsOneSided(const OutgoingRequest& request) const;
  // Whether a WRITE or READ is done one-sidedly: every region it names has a key here.
  bool Keyed(const OutgoingRequest& request) const;
  // A region's bounds and key: a static one from UCX_CONNECT, one registered at run time (id past
  // them) from REGION_INFO, asked over the bootstrap connection on first use and kept until
  // ForgetRegion. The pointer stays valid while the returned holder lives.
  using RegionHandle = std::shared_ptr<const RemoteRegion>;
  absl::StatusOr<RegionHandle> FindRegion(RegionId region) const;
  absl::StatusOr<RegionHandle> AttachRegion(RegionId region) const;
  // The send window: no more requests unanswered by the server than the max_inflight its
  // UCX_CONNECT answer announced (the server holds, and past a limit refuses, what comes beyond).
  // Takes `n` slots for requests about to be sent, progressing the worker (which brings the
  // answers that free them) while there is no room, until `deadline`. A run longer than the window
  // is sent in parts of its size. Inside a UCX callback (an asynchronous call's callback issuing a
  // call) nothing may progress the worker: the slots are taken even without room.
  absl::Status TakeWindow(uint32_t n, LazyDeadline& deadline);
  bool TryTakeWindow(uint32_t n);
  void ReleaseWindow(uint32_t n);
  // Sends requests as active messages (their calls registered first); breaks on failure.
  absl::Status SendRequests(absl::Span<const OutgoingRequest> requests,
                            absl::Span<const uint64_t> ids, uint64_t client_id);
  static ucs_status_t OnResponse(void* arg, const void* header, size_t header_length, void* data,
                                 size_t length, const ucp_am_recv_param_t* param);
  void Dispatch(std::string_view frame);
  // UCX found the server dead (peer error handling): every call fails at once.
  static void OnPeerFailure(void* arg, ucp_ep_h ep, ucs_status_t status);
  // The reader's step (CallTable::Step): progresses the worker once, paced by `pacer`.
  bool ProgressStep(PollPacer& pacer);
  // Watches the bootstrap connection and breaks this transport the moment the server closes it
  // (exits, is killed, or ends the session), so no one-sided operation lands in the memory of a
  // server that is gone.
  void WatchServer();
  void Break(const absl::Status& status);
  // Async of a request for the server; `counted` in requests (else in keepalives).
  void SendAsync(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                 absl::Time deadline, ResponseCallback done, bool counted);

  const wire::WireLimits limits_;
  ClientCounters* const counters_;
  ClientCounters bootstrap_counters_;  // the bootstrap's own round trip is not the caller's
  std::shared_ptr<Connection> tcp_;
  std::unique_ptr<UcxContext> ucx_;
  ucp_ep_h ep_ = nullptr;
  uint64_t session_ = 0;
  uint32_t window_ = 0;                   // 0: no limit announced
  std::atomic<uint32_t> outstanding_{0};  // requests sent to the server and not answered yet
  std::vector<RemoteRegion> regions_;
  mutable std::atomic<uint64_t> attach_ids_{1};
  mutable absl::Mutex attached_mu_;
  mutable absl::flat_hash_map<RegionId, RegionHandle> attached_ ABSL_GUARDED_BY(attached_mu_);
  std::atomic<bool> server_gone_{false};  // set by the watcher; checked before every flight
  std::thread watcher_;

  CallTable calls_;
  absl::Mutex background_mu_;
  bool closing_ ABSL_GUARDED_BY(background_mu_) = false;
  std::thread background_ ABSL_GUARDED_BY(background_mu_);  // started on the first Async call
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_UCX_CONNECTION_H_
