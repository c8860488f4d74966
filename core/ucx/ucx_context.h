// UcxContext: one UCP context and worker, as both ends of the UCX transport use them — the
// server (its heap allocated or registered here, requests as active messages) and each client
// connection (one-sided operations on the server's regions, requests as active messages).
//
// The worker runs in UCS_THREAD_MODE_MULTI (unless made for a single thread): any thread may post
// operations on it and progress it.
// Settings come from the environment as for every UCX program (UCX_TLS, UCX_NET_DEVICES, ...),
// except the atomic mode, always `cpu` (UCX_ATOMIC_MODE is overridden): one-sided atomics must be
// atomic with the server's own CPU atomics on the same words.
//
//   ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<UcxContext> ucx, UcxContext::Create({}));
//   ARDMA_ASSIGN_OR_RETURN(std::string address, ucx->WorkerAddress());
#ifndef ARDMA_CORE_UCX_UCX_CONTEXT_H_
#define ARDMA_CORE_UCX_UCX_CONTEXT_H_

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma {

// Addresses "ucx://HOST:PORT" and "ucx://unix:PATH" name the very same listener as "HOST:PORT" and
// "unix:PATH": the client bootstraps UCX over that connection (the UCX_CONNECT op).
inline constexpr std::string_view kUcxPrefix = "ucx://";
// Active-message ids. A request's header is the session number (u64) UCX_CONNECT gave; the data
// of both is one frame exactly as on TCP (core/wire/frame.h).
inline constexpr unsigned kAmRequest = 1;   // client -> server
inline constexpr unsigned kAmResponse = 2;  // server -> client

// A UCS status as an absl::Status: "<what>: <ucs message>", with the closest code (UNAVAILABLE for
// unreachable peers and transport errors, RESOURCE_EXHAUSTED for memory, ...).
absl::Status UcsError(ucs_status_t status, std::string_view what);

// Bytes of sent active messages UCX is not done with yet (a peer that does not progress holds
// them): counted in `bytes` and, if set, in `*total` (shared by many tallies).
struct SendTally {
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t>* total = nullptr;
};

// Sends `frame` on `ep` as active message `id`, with `header` (8 bytes: the session) if given.
// Eager only: both sides create their endpoints from worker addresses, without the wire-up
// handshake a rendezvous reply needs; eager messages of any size are fragmented and copied. A
// message UCX can send at once (a short one) costs nothing more; otherwise the bytes are kept
// until UCX is done with them, counted meanwhile in `tally` if given. UNAVAILABLE if the send
// fails at once.
absl::Status SendActiveMessage(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header,
                               std::string frame,
                               const std::shared_ptr<SendTally>& tally = nullptr);
// The same for bytes the caller keeps (a reused buffer): copied only if they must be kept.
absl::Status SendActiveMessage(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header,
                               std::string_view frame,
                               const std::shared_ptr<SendTally>& tally = nullptr);

struct UcxContextOptions {
  bool wakeup = false;  // the worker gets an event fd (ucp_worker_get_efd) to sleep on
  bool rma = true;      // one-sided operations and atomics (UCP_FEATURE_RMA | AMO64)
  // Only one thread ever calls into the worker (UCS_THREAD_MODE_SINGLE: no lock per call); else
  // any thread may (MULTI).
  bool single_thread = false;
};

class UcxContext {
 public:
  static absl::StatusOr<std::unique_ptr<UcxContext>> Create(const UcxContextOptions& options);
  // Another worker on this context (its memory and remote keys are the same; the worker, its
  // address, handlers and endpoints are its own), for one more thread to progress. It may outlive
  // this object.
  absl::StatusOr<std::unique_ptr<UcxContext>> AnotherWorker() const;
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h context() const { return context_->handle; }
  ucp_worker_h worker() const { return worker_; }

  // The worker's address, for a peer to create an endpoint to it.
  absl::StatusOr<std::string> WorkerAddress();

  // Calls `callback(arg, ...)` for every whole active message `id` that arrives.
  absl::Status SetAmHandler(unsigned id, ucp_am_recv_callback_t callback, void* arg);

  // Memory the transports can reach: Allocate asks UCX for it (shared memory on one host, so a
  // peer can map it and even its atomics are one-sided); Register makes existing memory (a file
  // mapping) reachable where a transport can register it (CMA, verbs).
  struct Mapping {
    char* base = nullptr;
    uint64_t size = 0;
    ucp_mem_h memh = nullptr;
  };
  absl::StatusOr<Mapping> Allocate(uint64_t size);
  absl::StatusOr<ucp_mem_h> Register(char* base, uint64_t size);
  void Unmap(ucp_mem_h memh);
  // The packed remote key of `memh`, for a peer's ucp_ep_rkey_unpack.
  absl::StatusOr<std::string> PackRkey(ucp_mem_h memh);

  // An endpoint to the worker at `worker_address` (a peer this process trusts: the client's
  // server, or an address ucx_address_check.h passed), its wire-up finished by `deadline`
  // (InfinitePast: not waited for). With `on_peer_failure`, and if HandlesPeerFailure() or
  // `force_peer` (the peer's endpoint has it: both must agree), the endpoint has peer error
  // handling: UCX fails what is in flight to a peer that died and calls
  // `on_peer_failure.cb(on_peer_failure.arg, ep, status)` on a thread progressing this worker.
  absl::StatusOr<ucp_ep_h> Connect(std::string_view worker_address, absl::Time deadline,
                                   std::optional<ucp_err_handler_t> on_peer_failure = std::nullopt,
                                   bool force_peer = false);
  // Whether this context's endpoints get peer error handling: only if none of its transports is
  // shared memory. UCX 1.13's shared-memory transports have none, and an endpoint that asks for
  // it cannot use them at all (its active messages would go over tcp), so a context with shared
  // memory (the default UCX_TLS on one host) makes its endpoints without it, and relies on the
  // bootstrap connection's close to see a peer die. One without (UCX_TLS=tcp, or verbs without
  // sm) has it.
  bool HandlesPeerFailure() const { return !context_->shared_memory; }

  // Closes an endpoint: first lets what it has in flight (its wire-up among it) finish, for at
  // most `flush_for`, then closes it forcibly where the endpoint allows that, else gracefully for
  // at most `flush_for` more (a peer that is gone must not hang this).
  void CloseEndpoint(ucp_ep_h ep, absl::Duration flush_for);

  // Progresses the worker until `request` (a ucs_status_ptr_t from an *_nbx call) completes, then
  // frees it. DEADLINE_EXCEEDED (the request cancelled) if `deadline` passes first. Paced as
  // PollPacer says.
  absl::Status Wait(ucs_status_ptr_t request, absl::Time deadline, std::string_view what);

  // Returns once the worker has something to progress (its event fd fires) or `timeout` passed;
  // at once if events are already pending. A context made without `wakeup` just sleeps.
  void SleepUntilEvent(absl::Duration timeout);

 private:
  // The UCP context, cleaned up once the last worker on it is gone.
  struct SharedContext {
    SharedContext(ucp_context_h h, bool w, bool shm) : handle(h), wakeup(w), shared_memory(shm) {}
    SharedContext(const SharedContext&) = delete;
    SharedContext& operator=(const SharedContext&) = delete;
    ~SharedContext() { ucp_cleanup(handle); }
    const ucp_context_h handle;
    const bool wakeup;
    const bool shared_memory;  // among its transports
  };
  static absl::StatusOr<std::unique_ptr<UcxContext>> WithWorker(
      std::shared_ptr<const SharedContext> context, bool single_thread);
  UcxContext(std::shared_ptr<const SharedContext> context, ucp_worker_h worker, int efd)
      : context_(std::move(context)), worker_(worker), efd_(efd) {}
  std::shared_ptr<const SharedContext> context_;
  ucp_worker_h worker_;
  int efd_;  // the worker's event fd; -1 without `wakeup`
};

// Paces a thread that polls a worker for a completion: hot for the first 100 us without progress
// (a shared-memory or loopback round trip completes in that time), then asleep on the worker's
// event fd between polls, for at most 20 us doubling to 1 ms. A call that waits long (a parked
// EXECUTE: a lock, a compile job) costs little CPU, and threads that wait for a peer's CPU (UCX's
// tcp transport needs the server's progress thread for every one-sided operation) leave it the
// cores. A waiter for messages (answers come as active messages, which fire the event fd) may
// sleep longer: with `deadline` (or `next_deadline`, asked before each sleep), sleeps keep
// doubling up to 1 s but never past the deadline, so a wait of seconds costs a few wake-ups.
class PollPacer {
 public:
  explicit PollPacer(UcxContext* ucx) : ucx_(ucx) {}
  PollPacer(UcxContext* ucx, absl::Time deadline, std::function<absl::Time()> next_deadline = {})
      : ucx_(ucx),
        long_waits_(true),
        deadline_(deadline),
        next_deadline_(std::move(next_deadline)) {}
  void Progressed() {
    idle_spins_ = 0;
    delay_ = absl::ZeroDuration();
  }
  void Idle();
  // Whether the caller should look at the clock (its deadline) now: after every sleep, and every
  // 256th poll while hot. So a deadline is kept to within the longest sleep.
  bool ClockDue() {
    bool due = slept_ || (++polls_ & 255) == 0;
    slept_ = false;
    return due;
  }

 private:
  UcxContext* ucx_;
  uint64_t polls_ = 0;
  bool slept_ = false;
  uint64_t idle_spins_ = 0;
  absl::Time idle_since_;
  absl::Duration delay_;
  bool long_waits_ = false;
  absl::Time deadline_ = absl::InfiniteFuture();
  std::function<absl::Time()> next_deadline_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_UCX_UCX_CONTEXT_H_
