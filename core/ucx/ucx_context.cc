#include "core/ucx/ucx_context.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/clock.h"
#include "core/status_macros.h"

namespace ardma {

absl::Status UcsError(ucs_status_t status, std::string_view what) {
  std::string message = absl::StrCat(ToAbsl(what), ": ", ucs_status_string(status));
  switch (status) {
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_INVALID_PARAM:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_UNSUPPORTED:
      return absl::FailedPreconditionError(message);
    case UCS_ERR_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    default:
      return absl::UnavailableError(message);
  }
}

namespace {

// An active message in flight: its header and frame live until UCX is done with them.
struct OutgoingMessage {
  uint64_t header;
  std::string frame;
  std::shared_ptr<SendTally> tally;

  ~OutgoingMessage() {
    if (tally == nullptr) return;
    tally->bytes.fetch_sub(frame.size(), std::memory_order_relaxed);
    if (tally->total != nullptr) tally->total->fetch_sub(frame.size(), std::memory_order_relaxed);
  }
};

// The send's completion: frees the request and the message. (A request freed before it completes
// gets no callback, so it is freed only here: the message would leak, and its bytes stay counted.)
void FreeOutgoing(void* request, ucs_status_t /*status*/, void* user_data) {
  ucp_request_free(request);
  delete static_cast<OutgoingMessage*>(user_data);
}

// Whether any of the context's transports is shared memory (as UCX prints its resources).
bool HasSharedMemory(ucp_context_h context) {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&buffer, &size);
  if (stream == nullptr) return true;  // assume so: endpoints are made as they always were
  ucp_context_print_info(context, stream);
  std::fclose(stream);
  std::string info(buffer, size);
  std::free(buffer);
  for (const char* shm : {"posix/", "sysv/", "xpmem/", "knem/", "cma/"}) {
    if (info.find(shm) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

namespace {

// Sends `frame` if UCX can at once (a request or an answer that fits a shared-memory FIFO entry):
// nothing allocated, counted or kept. NO_RESOURCE: the caller keeps the bytes and sends again.
ucs_status_t SendAtOnce(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header,
                        std::string_view frame) {
  uint64_t now_header = header.value_or(0);
  ucp_request_param_t now{};
  now.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
  now.flags = UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t at_once =
      ucp_am_send_nbx(ep, id, header ? &now_header : nullptr, header ? sizeof(now_header) : 0,
                      frame.data(), frame.size(), &now);
  // (FORCE_IMM_CMPL never makes a request: done, NO_RESOURCE, or another failure.)
  return UCS_PTR_STATUS(at_once);
}

// The rest of a send UCX could not do at once: the bytes are kept until it is done with them.
absl::Status SendKept(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header, std::string frame,
                      const std::shared_ptr<SendTally>& tally) {
  if (tally != nullptr) {
    tally->bytes.fetch_add(frame.size(), std::memory_order_relaxed);
    if (tally->total != nullptr) tally->total->fetch_add(frame.size(), std::memory_order_relaxed);
  }
  auto* message = new OutgoingMessage{header.value_or(0), std::move(frame), tally};
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  param.cb.send = FreeOutgoing;
  param.user_data = message;
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, id, header ? &message->header : nullptr,
                                       header ? sizeof(message->header) : 0, message->frame.data(),
                                       message->frame.size(), &param);
  if (r == nullptr) {
    delete message;  // done at once: no callback
  } else if (UCS_PTR_IS_ERR(r)) {
    delete message;
    return UcsError(UCS_PTR_STATUS(r), "ucp_am_send");
  }  // else FreeOutgoing frees both once UCX is done
  return absl::OkStatus();
}

// At once if it can be, else kept: `frame` is a std::string (moved into what is kept) or a
// std::string_view (copied).
template <typename Frame>
absl::Status Send(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header, Frame&& frame,
                  const std::shared_ptr<SendTally>& tally) {
  ucs_status_t now = SendAtOnce(ep, id, header, frame);
  if (now == UCS_OK) return absl::OkStatus();
  if (now != UCS_ERR_NO_RESOURCE) return UcsError(now, "ucp_am_send");
  return SendKept(ep, id, header, std::string(std::forward<Frame>(frame)), tally);
}

}  // namespace

absl::Status SendActiveMessage(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header,
                               std::string frame, const std::shared_ptr<SendTally>& tally) {
  return Send(ep, id, header, std::move(frame), tally);
}

absl::Status SendActiveMessage(ucp_ep_h ep, unsigned id, std::optional<uint64_t> header,
                               std::string_view frame, const std::shared_ptr<SendTally>& tally) {
  return Send(ep, id, header, frame, tally);
}

absl::StatusOr<std::unique_ptr<UcxContext>> UcxContext::Create(const UcxContextOptions& options) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return UcsError(s, "ucp_config_read");
  // Atomics on the CPU, whatever UCX_ATOMIC_MODE says: active code updates the same words with the
  // server's CPU atomics, and a NIC's device atomics are not atomic with those (UCX's default
  // `guess` picks device atomics where a NIC offers them). Both ends pin it.
  s = ucp_config_modify(config, "ATOMIC_MODE", "cpu");
  if (s != UCS_OK) {
    ucp_config_release(config);
    return UcsError(s, "setting UCX's atomic mode to cpu");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | (options.wakeup ? UCP_FEATURE_WAKEUP : 0) |
                    (options.rma ? UCP_FEATURE_RMA | UCP_FEATURE_AMO64 : 0);
  params.mt_workers_shared = 1;
  ucp_context_h context = nullptr;
  s = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (s != UCS_OK) return UcsError(s, "ucp_init");
  return WithWorker(
      std::make_shared<const SharedContext>(context, options.wakeup, HasSharedMemory(context)),
      options.single_thread);
}

absl::StatusOr<std::unique_ptr<UcxContext>> UcxContext::AnotherWorker() const {
  return WithWorker(context_, /*single_thread=*/false);
}

absl::StatusOr<std::unique_ptr<UcxContext>> UcxContext::WithWorker(
    std::shared_ptr<const SharedContext> context, bool single_thread) {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = single_thread ? UCS_THREAD_MODE_SINGLE : UCS_THREAD_MODE_MULTI;
  ucp_worker_h worker = nullptr;
  ucs_status_t s = ucp_worker_create(context->handle, &wp, &worker);
  if (s != UCS_OK) return UcsError(s, "ucp_worker_create");
  int efd = -1;
  if (context->wakeup && (s = ucp_worker_get_efd(worker, &efd)) != UCS_OK) {
    ucp_worker_destroy(worker);
    return UcsError(s, "ucp_worker_get_efd");
  }
  return std::unique_ptr<UcxContext>(new UcxContext(std::move(context), worker, efd));
}

UcxContext::~UcxContext() { ucp_worker_destroy(worker_); }

absl::StatusOr<std::string> UcxContext::WorkerAddress() {
  ucp_address_t* address = nullptr;
  size_t length = 0;
  ucs_status_t s = ucp_worker_get_address(worker_, &address, &length);
  if (s != UCS_OK) return UcsError(s, "ucp_worker_get_address");
  std::string out(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  return out;
}

absl::Status UcxContext::SetAmHandler(unsigned id, ucp_am_recv_callback_t callback, void* arg) {
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = id;
  am.cb = callback;
  am.arg = arg;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  ucs_status_t s = ucp_worker_set_am_recv_handler(worker_, &am);
  return s == UCS_OK ? absl::OkStatus() : UcsError(s, "ucp_worker_set_am_recv_handler");
}

absl::StatusOr<UcxContext::Mapping> UcxContext::Allocate(uint64_t size) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = size;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  ucs_status_t s = ucp_mem_map(context(), &params, &memh);
  if (s != UCS_OK) return UcsError(s, absl::StrCat("allocating ", size, " bytes through UCX"));
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  s = ucp_mem_query(memh, &attr);
  if (s != UCS_OK) {
    ucp_mem_unmap(context(), memh);
    return UcsError(s, "ucp_mem_query");
  }
  return Mapping{static_cast<char*>(attr.address), size, memh};
}

absl::StatusOr<ucp_mem_h> UcxContext::Register(char* base, uint64_t size) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = size;
  ucp_mem_h memh = nullptr;
  ucs_status_t s = ucp_mem_map(context(), &params, &memh);
  if (s != UCS_OK) return UcsError(s, absl::StrCat("registering ", size, " bytes with UCX"));
  return memh;
}

void UcxContext::Unmap(ucp_mem_h memh) { ucp_mem_unmap(context(), memh); }

absl::StatusOr<std::string> UcxContext::PackRkey(ucp_mem_h memh) {
  void* buffer = nullptr;
  size_t length = 0;
  ucs_status_t s = ucp_rkey_pack(context(), memh, &buffer, &length);
  if (s != UCS_OK) return UcsError(s, "ucp_rkey_pack");
  std::string out(static_cast<const char*>(buffer), length);
  ucp_rkey_buffer_release(buffer);
  return out;
}

namespace {
constexpr size_t kAddressPadding = 4096;  // zeros after a worker address given to UCX
}  // namespace

absl::StatusOr<ucp_ep_h> UcxContext::Connect(std::string_view worker_address, absl::Time deadline,
                                             std::optional<ucp_err_handler_t> on_peer_failure,
                                             bool force_peer) {
  // UCX takes an address without its length and reads it as far as its own fields say, so a
  // truncated one is read past its end: into zeros here, always, whatever the caller's buffer
  // holds after it (a frame reader's old bytes made the server and its address check, which
  // must unpack an address alike, disagree).
  std::string padded(worker_address.size() + kAddressPadding, '\0');
  std::memcpy(padded.data(), worker_address.data(), worker_address.size());
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(padded.data());
  ucp_ep_h ep = nullptr;
  ucs_status_t s = UCS_ERR_UNSUPPORTED;
  if (on_peer_failure.has_value() && (HandlesPeerFailure() || force_peer)) {
    ucp_ep_params_t peer = params;
    peer.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    peer.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    peer.err_handler = *on_peer_failure;
    s = ucp_ep_create(worker_, &peer, &ep);
  }
  if (s != UCS_OK) s = ucp_ep_create(worker_, &params, &ep);
  if (s != UCS_OK) return UcsError(s, "creating an endpoint to a worker");
  if (deadline == absl::InfinitePast()) return ep;
  // Finish the wire-up before the endpoint is used (and long before it could be closed: UCX must
  // not close an endpoint whose wire-up messages are still in flight).
  ucp_request_param_t flush{};
  absl::Status done = Wait(ucp_ep_flush_nbx(ep, &flush), deadline, "connecting to the worker");
  if (!done.ok()) {
    CloseEndpoint(ep, absl::Milliseconds(100));
    return done;
  }
  return ep;
}

namespace {

// Progresses `worker` until `request` completes or `until` passes, then frees it (UCX finishes
// and releases it later if it has not completed).
void WaitBounded(ucp_worker_h worker, ucs_status_ptr_t request, absl::Time until) {
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  while (ucp_request_check_status(request) == UCS_INPROGRESS && absl::Now() < until) {
    ucp_worker_progress(worker);
  }
  ucp_request_free(request);
}

}  // namespace

void UcxContext::CloseEndpoint(ucp_ep_h ep, absl::Duration flush_for) {
  ucp_request_param_t param{};
  WaitBounded(worker_, ucp_ep_flush_nbx(ep, &param), absl::Now() + flush_for);
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t close = ucp_ep_close_nbx(ep, &param);
  if (UCS_PTR_IS_ERR(close)) {
    // Forcing needs peer error handling, which shared-memory lanes lack: close gracefully,
    // bounded, for a peer that no longer progresses never completes it.
    param.flags = 0;
    close = ucp_ep_close_nbx(ep, &param);
  }
  WaitBounded(worker_, close, absl::Now() + flush_for);
}

absl::Status UcxContext::Wait(ucs_status_ptr_t request, absl::Time deadline,
                              std::string_view what) {
  if (request == nullptr) return absl::OkStatus();
  if (UCS_PTR_IS_ERR(request)) return UcsError(UCS_PTR_STATUS(request), what);
  ucs_status_t s;
  PollPacer pacer(this);
  for (;;) {
    s = ucp_request_check_status(request);
    if (s != UCS_INPROGRESS) break;
    if (ucp_worker_progress(worker_) != 0) {
      pacer.Progressed();
    } else {
      pacer.Idle();
    }
    if (pacer.ClockDue() && FastNow() >= deadline) {
      // Some requests (a flush to a peer that never answers) do not complete even when
      // cancelled: give them a moment, then leave them to UCX.
      ucp_request_cancel(worker_, request);
      WaitBounded(worker_, request, absl::Now() + absl::Milliseconds(100));
      return absl::DeadlineExceededError(absl::StrCat(ToAbsl(what), ": no completion in time"));
    }
  }
  ucp_request_free(request);
  return s == UCS_OK ? absl::OkStatus() : UcsError(s, what);
}

void UcxContext::SleepUntilEvent(absl::Duration timeout) {
  if (efd_ < 0) {
    absl::SleepFor(timeout);
    return;
  }
  // UCS_ERR_BUSY: events are pending, progress first.
  if (ucp_worker_arm(worker_) != UCS_OK) return;
  pollfd fd{.fd = efd_, .events = POLLIN, .revents = 0};
  timespec ts = absl::ToTimespec(timeout);
  ::ppoll(&fd, 1, &ts, nullptr);
}

void PollPacer::Idle() {
  constexpr absl::Duration kHot = absl::Microseconds(100);
  constexpr absl::Duration kYieldAfter = absl::Microseconds(5);
  constexpr absl::Duration kFirstSleep = absl::Microseconds(20);
  constexpr absl::Duration kLongestSleep = absl::Milliseconds(1);
  constexpr absl::Duration kLongestMessageSleep = absl::Seconds(1);
  // The first polls of a wait cost no clock reading (most one-sided operations complete there).
  constexpr uint64_t kUntimedPolls = 32;
  if (++idle_spins_ <= kUntimedPolls) {
    if (idle_spins_ == kUntimedPolls) idle_since_ = FastNow();
    return;
  }
  if (delay_ == absl::ZeroDuration()) {
    // Still hot: look at the clock only now and then, and past the first microseconds let a
    // thread that has work run on this CPU (with more busy threads than cores, the one whose
    // turn it is — a lock's next holder, the server's progress thread — would otherwise wait for
    // spinners' time slices to end).
    if ((idle_spins_ & 15) != 0) return;
    absl::Duration hot = FastNow() - idle_since_;
    if (hot < kHot) {
      if (hot >= kYieldAfter) ::sched_yield();
      return;
    }
    delay_ = kFirstSleep;
  }
  absl::Duration sleep = delay_;
  if (long_waits_) {  // never past the deadline, where the caller looks at the clock
    absl::Time deadline = next_deadline_ ? next_deadline_() : deadline_;
    sleep = std::clamp(deadline - FastNow(), absl::ZeroDuration(), delay_);
  }
  ucx_->SleepUntilEvent(sleep);
  slept_ = true;
  delay_ = std::min(delay_ * 2, long_waits_ ? kLongestMessageSleep : kLongestSleep);
}

}  // namespace ardma
