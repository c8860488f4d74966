#include "core/client/ucx_connection.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/clock.h"
#include "core/status_macros.h"
#include "core/wire/frame_reader.h"
#include "core/wire/messages.h"

namespace ardma {
namespace {

// Set while this thread runs a UCX callback (a response's dispatch), where the worker must not be
// progressed again.
thread_local bool in_ucx_callback = false;

// A thread's frame buffer is kept for its next request up to this size.
constexpr size_t kKeptFrameBuffer = 64 << 10;

using wire::Op;

// A request the server would refuse is refused here, with the server's error, before anything is
// applied: the refusal is the answer (*result), not a transport failure (OneSided's `true`).
bool Refuse(ResponsePayload* result, absl::Status refusal) {
  *result = std::move(refusal);
  return true;
}

// A connection's last reference may go on one of its own threads (the background progress thread
// holds one; a callback on the watcher may drop the client's), which then tears the UCX objects
// down detached. If the process exits meanwhile, libucs's own destructor runs concurrently with
// that teardown and aborts (UCX 1.13: "vfs_obj.c Assertion ... failed"). So such threads are
// counted from the moment their teardown becomes certain, and exit waits for them, bounded.
std::atomic<int> detached_teardowns{0};

void WaitForDetachedTeardowns() {
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (detached_teardowns.load(std::memory_order_acquire) > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void BeginDetachedTeardown() {
  static std::once_flag registered;
  // Handlers registered after start-up run before the shared libraries' destructors.
  std::call_once(registered, [] { std::atexit(WaitForDetachedTeardowns); });
  detached_teardowns.fetch_add(1, std::memory_order_acq_rel);
}

void EndDetachedTeardown() { detached_teardowns.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace

absl::StatusOr<std::shared_ptr<UcxConnection>> UcxConnection::Open(
    std::string_view address, absl::Duration timeout, const wire::WireLimits& limits,
    ClientCounters* counters, const security::Credentials* credentials) {
  std::shared_ptr<UcxConnection> c(new UcxConnection(limits, counters));
  ARDMA_RETURN_IF_ERROR(c->Bootstrap(address, timeout, credentials));
  return c;
}

absl::Status UcxConnection::Bootstrap(std::string_view address, absl::Duration timeout,
                                      const security::Credentials* credentials) {
  ARDMA_ASSIGN_OR_RETURN(
      tcp_, Connection::Open(address, timeout, limits_, &bootstrap_counters_, credentials));
  ARDMA_ASSIGN_OR_RETURN(ucx_, UcxContext::Create({.wakeup = true}));
  ARDMA_ASSIGN_OR_RETURN(std::string worker_address, ucx_->WorkerAddress());
  std::string payload;
  wire::EncodeUcxConnectRequest(
      {.worker_address = worker_address, .peer_error_handling = ucx_->HandlesPeerFailure()},
      &payload);
  ARDMA_ASSIGN_OR_RETURN(
      ResponsePayload answer,
      tcp_->RoundTripOne({Op::kUcxConnect, std::move(payload)}, 0, 0, absl::Now() + timeout));
  if (!answer.ok()) return answer.status();
  ARDMA_ASSIGN_OR_RETURN(wire::UcxHello hello, wire::DecodeUcxHello(*answer));
  session_ = hello.session;

  ARDMA_RETURN_IF_ERROR(ucx_->SetAmHandler(kAmResponse, &UcxConnection::OnResponse, this));

  ARDMA_ASSIGN_OR_RETURN(ep_,
                         ucx_->Connect(hello.worker_address, absl::Now() + timeout,
                                       ucp_err_handler_t{&UcxConnection::OnPeerFailure, this}));

  window_ = hello.max_inflight;
  for (const wire::UcxRegionKey& k : hello.regions) {
    if (k.region != regions_.size())
      return absl::DataLossError("UCX_CONNECT: regions out of order");
    RemoteRegion r;
    r.bounds = {k.size, k.read_only};
    r.base = k.base;
    if (k.rkey.empty()) {  // not for this connection's permissions: through the server
      regions_.push_back(r);
      continue;
    }
    ucs_status_t s = ucp_ep_rkey_unpack(ep_, k.rkey.data(), &r.rkey);
    if (s != UCS_OK) return UcsError(s, absl::StrCat("unpacking the key of region ", k.region));
    void* local = nullptr;
    if (ucp_rkey_ptr(r.rkey, r.base, &local) == UCS_OK) r.local = static_cast<char*>(local);
    regions_.push_back(r);
  }
  watcher_ = std::thread([this] { WatchServer(); });
  return absl::OkStatus();
}

UcxConnection::~UcxConnection() {
  const bool on_watcher = watcher_.joinable() && watcher_.get_id() == std::this_thread::get_id();
  if (on_watcher) BeginDetachedTeardown();
  Close();
  // The last reference may go on one of this connection's own threads (a callback run by Break on
  // the watcher, or by the background progress thread, that replaced the connection).
  JoinUnlessSelf(watcher_);
  std::thread background;
  {
    absl::MutexLock lock(&background_mu_);
    background = std::move(background_);
  }
  JoinUnlessSelf(background);
  {
    absl::MutexLock lock(&attached_mu_);
    attached_.clear();  // their keys go before the endpoint
  }
  for (RemoteRegion& r : regions_) {
    if (r.rkey != nullptr) ucp_rkey_destroy(r.rkey);
  }
  if (ep_ != nullptr) ucx_->CloseEndpoint(ep_, absl::Seconds(1));
  ucx_.reset();
  if (on_watcher) EndDetachedTeardown();
}

bool UcxConnection::broken() const {
  if (server_gone_.load(std::memory_order_acquire)) return true;
  if (!calls_.failure().ok()) return true;
  return tcp_ == nullptr || tcp_->broken();
}

void UcxConnection::Close() {
  {
    absl::MutexLock lock(&background_mu_);
    // The background thread ends once the calls are closed, and may then hold the last reference.
    if (!closing_ && background_.joinable()) BeginDetachedTeardown();
    closing_ = true;
  }
  calls_.Close();
  if (tcp_ != nullptr) tcp_->Close();
}

bool UcxConnection::OneSidedAtomics(RegionId region) const {
  return region < regions_.size() && regions_[region].mapped();
}

std::string UcxConnection::EndpointInfo() const {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&buffer, &size);
  if (stream == nullptr) return std::string();
  ucp_ep_print_info(ep_, stream);
  std::fclose(stream);
  std::string out(buffer, size);
  std::free(buffer);
  return out;
}

std::string UcxConnection::Describe() const {
  std::string out = "UCX session; one-sided CAS/FETCH_ADD on regions:";
  for (RegionId r = 0; r < regions_.size(); ++r) {
    absl::StrAppend(&out, " ", r, regions_[r].mapped() ? "=yes" : "=no(server)");
  }
  return absl::StrCat(out, "\n", EndpointInfo());
}

absl::StatusOr<UcxConnection::RegionHandle> UcxConnection::FindRegion(RegionId region) const {
  // A static region lives as long as this connection: a handle with no owner, no counting.
  if (region < regions_.size()) return RegionHandle(RegionHandle(), &regions_[region]);
  {
    absl::ReaderMutexLock lock(&attached_mu_);
    auto it = attached_.find(region);
    if (it != attached_.end()) return it->second;
  }
  return AttachRegion(region);
}

absl::StatusOr<UcxConnection::RegionHandle> UcxConnection::AttachRegion(RegionId region) const {
  std::string payload;
  wire::EncodeRegionId(region, &payload);
  // An active message like any request to the server (the bootstrap connection is the watcher's),
  // with an id from a range the client's own never reach.
  uint64_t id = (1ull << 63) | attach_ids_.fetch_add(1, std::memory_order_relaxed);
  ARDMA_ASSIGN_OR_RETURN(ResponsePayload answer, const_cast<UcxConnection*>(this)->RoundTripOne(
                                                     {Op::kRegionInfo, std::move(payload)}, id, 0,
                                                     absl::Now() + absl::Seconds(10)));
  if (!answer.ok()) return answer.status();
  ARDMA_ASSIGN_OR_RETURN(wire::UcxRegionKey key, wire::DecodeRegionKey(*answer));
  auto r = std::shared_ptr<RemoteRegion>(new RemoteRegion, [](RemoteRegion* r) {
    if (r->rkey != nullptr) ucp_rkey_destroy(r->rkey);
    delete r;
  });
  r->bounds = {key.size, key.read_only};
  r->base = key.base;
  if (!key.rkey.empty()) {
    ucs_status_t s = ucp_ep_rkey_unpack(ep_, key.rkey.data(), &r->rkey);
    if (s != UCS_OK) return UcsError(s, absl::StrCat("unpacking the key of region ", region));
    void* local = nullptr;
    if (ucp_rkey_ptr(r->rkey, r->base, &local) == UCS_OK) r->local = static_cast<char*>(local);
  }
  absl::MutexLock lock(&attached_mu_);
  auto [it, added] = attached_.emplace(region, std::move(r));
  return it->second;
}

void UcxConnection::ForgetRegion(RegionId region) {
  absl::MutexLock lock(&attached_mu_);
  attached_.erase(region);
}

bool UcxConnection::Keyed(const OutgoingRequest& request) const {
  auto keyed = [this](RegionId region) {
    if (region < regions_.size()) return regions_[region].rkey != nullptr;
    // Registered at run time: one-sided if this connection gets its key; unknown ones are
    // refused with the server's error, from FindRegion.
    absl::StatusOr<RegionHandle> r = FindRegion(region);
    return !r.ok() || (*r)->rkey != nullptr;
  };
  if (const auto* reads = std::get_if<OutgoingRequest::Reads>(&request.data)) {
    return std::all_of(reads->begin(), reads->end(),
                       [&](const wire::ReadEntry& e) { return keyed(e.region); });
  }
  if (const auto* writes = std::get_if<OutgoingRequest::Writes>(&request.data)) {
    return std::all_of(writes->begin(), writes->end(),
                       [&](const wire::WriteEntry& e) { return keyed(e.region); });
  }
  return false;
}

bool UcxConnection::IsOneSided(const OutgoingRequest& request) const {
  if (const auto* cas = std::get_if<wire::CasRequest>(&request.data)) {
    return OneSidedAtomics(cas->region);
  }
  if (const auto* add = std::get_if<wire::FetchAddRequest>(&request.data)) {
    return OneSidedAtomics(add->region);
  }
  // READ and WRITE given as values (every one a Client makes); an encoded one goes to the server.
  return IsDataOperation(request);
}

void UcxConnection::WatchServer() {
  // Asleep until the bootstrap connection ends: the server closing it, or Close shutting it down
  // (which wakes this at once), so an idle client does not wake on a period.
  for (;;) {
    bool closed = tcp_->WaitForClose(absl::InfiniteDuration());
    {
      absl::MutexLock lock(&background_mu_);
      if (closing_) return;
    }
    if (closed) {
      server_gone_.store(true, std::memory_order_release);
      Break(absl::UnavailableError("ardmad closed the connection"));
      return;
    }
  }
}

absl::StatusOr<bool> UcxConnection::OneSided(const OutgoingRequest& request, LazyDeadline& deadline,
                                             ResponsePayload* result) {
  if (const auto* reads = std::get_if<OutgoingRequest::Reads>(&request.data)) {
    return OneSidedRead(*reads, deadline, result);
  }
  if (const auto* writes = std::get_if<OutgoingRequest::Writes>(&request.data)) {
    return OneSidedWrite(*writes, deadline, result);
  }
  return OneSidedAtomic(request, deadline, result);
}

absl::Status UcxConnection::WaitAll(Inflight* requests, LazyDeadline& deadline,
                                    std::string_view what) {
  absl::Status status;
  for (ucs_status_ptr_t r : *requests) {
    // (A request done at once is null: no wait, no clock.)
    status.Update(r == nullptr ? absl::OkStatus() : ucx_->Wait(r, deadline.Get(), what));
  }
  requests->clear();
  return status;
}

absl::StatusOr<bool> UcxConnection::OneSidedRead(const OutgoingRequest::Reads& entries,
                                                 LazyDeadline& deadline, ResponsePayload* result) {
  // (Before the answer's buffer is allocated.)
  if (absl::Status s = wire::CheckBatchSize(entries.size(), limits_, "READ"); !s.ok()) {
    return Refuse(result, s);
  }
  uint64_t total = 0;
  for (const wire::ReadEntry& e : entries) total += e.len;
  if (absl::Status s = wire::CheckReadResponseSize(total, limits_); !s.ok()) {
    return Refuse(result, s);
  }
  std::string out(total, '\0');
  absl::InlinedVector<ReadOp, 16> ops;  // (a batch of 16 takes no allocation)
  size_t at = 0;
  for (const wire::ReadEntry& e : entries) {
    ops.push_back({e.addr, std::span<char>(out.data() + at, e.len), e.region});
    at += e.len;
  }
  absl::Status answer;
  ARDMA_ASSIGN_OR_RETURN(bool done, ReadChecked(ops, total, deadline, &answer));
  if (!done) return false;
  if (answer.ok()) {
    *result = std::move(out);
  } else {
    *result = std::move(answer);
  }
  return true;
}

absl::StatusOr<bool> UcxConnection::ReadInto(std::span<const ReadOp> ops, LazyDeadline& deadline,
                                             absl::Status* answer) {
  if (absl::Status s = wire::CheckBatchSize(ops.size(), limits_, "READ"); !s.ok()) {
    *answer = std::move(s);
    return true;
  }
  uint64_t total = 0;
  for (const ReadOp& op : ops) total += op.out.size();
  if (absl::Status s = wire::CheckReadResponseSize(total, limits_); !s.ok()) {
    *answer = std::move(s);
    return true;
  }
  return ReadChecked(ops, total, deadline, answer);
}

absl::StatusOr<bool> UcxConnection::ReadChecked(std::span<const ReadOp> ops, uint64_t total,
                                                LazyDeadline& deadline, absl::Status* answer) {
  // Each region looked up once for a run of READs in it (a batch is mostly one region).
  absl::InlinedVector<RegionHandle, 2> held;
  absl::InlinedVector<const RemoteRegion*, 16> found;
  for (const ReadOp& op : ops) {
    if (found.empty() || ops[found.size() - 1].region != op.region) {
      absl::StatusOr<RegionHandle> r = FindRegion(op.region);
      if (!r.ok()) {
        *answer = r.status();
        return true;
      }
      held.push_back(*std::move(r));
    }
    const RemoteRegion& r = *held.back();
    if (absl::Status s = r.bounds.CheckRange(op.addr, op.out.size()); !s.ok()) {
      *answer = std::move(s);
      return true;
    }
    if (r.rkey == nullptr) return false;
    found.push_back(&r);
  }
  Inflight inflight;
  ucp_request_param_t param{};
  std::atomic_thread_fence(std::memory_order_acquire);  // after what the server wrote before
  for (size_t i = 0; i < ops.size(); ++i) {
    const ReadOp& op = ops[i];
    const RemoteRegion& r = *found[i];
    if (op.out.empty()) continue;
    if (r.mapped()) {
      std::memcpy(op.out.data(), r.local + op.addr, op.out.size());
    } else {
      inflight.push_back(
          ucp_get_nbx(ep_, op.out.data(), op.out.size(), r.base + op.addr, r.rkey, &param));
    }
  }
  ARDMA_RETURN_IF_ERROR(WaitAll(&inflight, deadline, "ucp_get"));
  counters_->bytes_received.fetch_add(total, std::memory_order_relaxed);
  *answer = absl::OkStatus();
  return true;
}

absl::StatusOr<bool> UcxConnection::OneSidedWrite(const OutgoingRequest::Writes& entries,
                                                  LazyDeadline& deadline, ResponsePayload* result) {
  Inflight inflight;
  ucp_request_param_t param{};
  if (absl::Status s = wire::CheckBatchSize(entries.size(), limits_, "WRITE"); !s.ok()) {
    return Refuse(result, s);
  }
  absl::InlinedVector<RegionHandle, 4> found;
  for (const wire::WriteEntry& e : entries) {
    absl::StatusOr<RegionHandle> r = FindRegion(e.region);
    if (!r.ok()) return Refuse(result, r.status());
    if (absl::Status s = (*r)->bounds.CheckWritable(e.addr, e.data.size()); !s.ok()) {
      return Refuse(result, s);
    }
    if ((*r)->rkey == nullptr) return false;
    found.push_back(*std::move(r));
  }
  bool put = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    const wire::WriteEntry& e = entries[i];
    const RemoteRegion& r = *found[i];
    if (e.data.empty()) continue;
    if (r.mapped()) {
      std::memcpy(r.local + e.addr, e.data.data(), e.data.size());
    } else {
      inflight.push_back(
          ucp_put_nbx(ep_, e.data.data(), e.data.size(), r.base + e.addr, r.rkey, &param));
      put = true;
    }
    counters_->bytes_sent.fetch_add(e.data.size(), std::memory_order_relaxed);
  }
  // Acknowledged means done at the server: stores to the mapping are visible to it in order
  // with this thread's next ones; a put is once the endpoint is flushed.
  std::atomic_thread_fence(std::memory_order_release);
  if (put) {
    ARDMA_RETURN_IF_ERROR(WaitAll(&inflight, deadline, "ucp_put"));
    inflight.push_back(ucp_ep_flush_nbx(ep_, &param));
    ARDMA_RETURN_IF_ERROR(WaitAll(&inflight, deadline, "ucp_ep_flush"));
  }
  *result = std::string();
  return true;
}

absl::StatusOr<bool> UcxConnection::OneSidedAtomic(const OutgoingRequest& request,
                                                   LazyDeadline& deadline,
                                                   ResponsePayload* result) {
  Inflight inflight;
  ucp_request_param_t param{};
  RegionId region;
  uint64_t addr, operand, swap = 0;
  const auto* cas_request = std::get_if<wire::CasRequest>(&request.data);
  bool cas = cas_request != nullptr;
  if (cas) {
    region = cas_request->region;
    addr = cas_request->addr;
    operand = cas_request->expected;
    swap = cas_request->desired;
  } else {
    const auto& add = std::get<wire::FetchAddRequest>(request.data);
    region = add.region;
    addr = add.addr;
    operand = add.delta;
  }
  absl::StatusOr<RegionHandle> r = FindRegion(region);
  if (!r.ok()) return Refuse(result, r.status());
  if (absl::Status s = (*r)->bounds.CheckAtomic(addr); !s.ok()) return Refuse(result, s);
  uint64_t reply = swap;  // CSWAP: in, the value to store; out, the old value
  if ((*r)->mapped()) {   // the region's word itself, as active code's atomics see it
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>((*r)->local + addr));
    if (cas) {
      reply = operand;
      word.compare_exchange_strong(reply, swap);
    } else {
      reply = word.fetch_add(operand);
    }
    std::string out;
    wire::EncodeU64Response(reply, &out);
    *result = std::move(out);
    return true;
  }
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
  param.datatype = ucp_dt_make_contig(8);
  param.reply_buffer = &reply;
  inflight.push_back(ucp_atomic_op_nbx(ep_, cas ? UCP_ATOMIC_OP_CSWAP : UCP_ATOMIC_OP_ADD, &operand,
                                       1, (*r)->base + addr, (*r)->rkey, &param));
  ARDMA_RETURN_IF_ERROR(WaitAll(&inflight, deadline, cas ? "ucp CAS" : "ucp FETCH_ADD"));
  std::string out;
  wire::EncodeU64Response(reply, &out);
  *result = std::move(out);
  return true;
}

absl::Status UcxConnection::SendRequests(absl::Span<const OutgoingRequest> requests,
                                         absl::Span<const uint64_t> ids, uint64_t client_id) {
  // Framed in this thread's buffer, which UCX copies from (or the send keeps a copy).
  thread_local std::string frame;
  absl::Status sent;
  for (size_t i = 0; i < requests.size() && sent.ok(); ++i) {
    frame.clear();
    AppendFrame(requests[i], ids[i], client_id, &frame);
    counters_->bytes_sent.fetch_add(frame.size(), std::memory_order_relaxed);
    sent = SendActiveMessage(ep_, kAmRequest, session_, std::string_view(frame));
  }
  if (frame.capacity() > kKeptFrameBuffer) std::string().swap(frame);  // (after a large WRITE)
  if (!sent.ok()) Break(sent);
  return sent;
}

absl::Status UcxConnection::RoundTrip(absl::Span<const OutgoingRequest> requests,
                                      absl::Span<const uint64_t> request_ids, uint64_t client_id,
                                      LazyDeadline& deadline, absl::Span<ResponsePayload> results) {
  if (server_gone_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("ardmad closed the connection");
  }
  ARDMA_RETURN_IF_ERROR(calls_.failure());
  counters_->round_trips.fetch_add(1, std::memory_order_relaxed);
  counters_->requests.fetch_add(requests.size(), std::memory_order_relaxed);
  // In order: one-sided operations complete before the next request starts, and a run of
  // requests for the server is sent at once and awaited before the next one-sided operation.
  for (size_t i = 0; i < requests.size();) {
    if (IsOneSided(requests[i])) {
      ARDMA_ASSIGN_OR_RETURN(bool done, OneSided(requests[i], deadline, &results[i]));
      if (done) {
        ++i;
        continue;
      }
    }
    size_t end = i + 1;  // requests[i] is for the server: alone or with the next ones for it
    while (end < requests.size() && !IsOneSided(requests[end])) ++end;
    if (window_ != 0) end = std::min(end, i + window_);  // the rest in the next part
    auto n = static_cast<uint32_t>(end - i);
    ARDMA_RETURN_IF_ERROR(TakeWindow(n, deadline));  // (reads the clock only if it waits)
    absl::Span<const uint64_t> ids = request_ids.subspan(i, n);
    CallTable::Expected expected(ids);
    if (absl::Status registered = calls_.Expect(expected); !registered.ok()) {
      ReleaseWindow(n);
      return registered;
    }
    ARDMA_RETURN_IF_ERROR(SendRequests(requests.subspan(i, n), ids, client_id));
    const absl::Time until = deadline.Get();  // (the clock read while the server works)
    PollPacer pacer(ucx_.get(), until);       // (answers are active messages: they wake it)
    ARDMA_RETURN_IF_ERROR(calls_.Await(
        expected, until, [&] { return ProgressStep(pacer); }, results.subspan(i, n)));
    i = end;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> UcxConnection::OnThisThread(
    absl::Duration timeout, absl::FunctionRef<absl::StatusOr<bool>(LazyDeadline&)> op) {
  if (server_gone_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("ardmad closed the connection");
  }
  ARDMA_RETURN_IF_ERROR(calls_.failure());
  LazyDeadline deadline = LazyDeadline::After(timeout);
  ARDMA_ASSIGN_OR_RETURN(bool done, op(deadline));
  if (done) {
    counters_->round_trips.fetch_add(1, std::memory_order_relaxed);
    counters_->requests.fetch_add(1, std::memory_order_relaxed);
  }
  return done;
}

absl::StatusOr<bool> UcxConnection::Direct(const OutgoingRequest& request, absl::Duration timeout,
                                           ResponsePayload* result) {
  if (!IsOneSided(request)) return false;
  return OnThisThread(timeout,
                      [&](LazyDeadline& deadline) { return OneSided(request, deadline, result); });
}

absl::StatusOr<bool> UcxConnection::DirectReads(std::span<const ReadOp> ops, absl::Duration timeout,
                                                absl::Status* answer) {
  return OnThisThread(timeout,
                      [&](LazyDeadline& deadline) { return ReadInto(ops, deadline, answer); });
}

void UcxConnection::Async(const OutgoingRequest& request, uint64_t request_id, uint64_t client_id,
                          absl::Time deadline, ResponseCallback done) {
  if (IsOneSided(request)) {
    // One-sided operations complete on the calling thread.
    ResponsePayload result;
    LazyDeadline until(deadline);
    absl::StatusOr<bool> s = OneSided(request, until, &result);
    if (!s.ok() || *s) {
      done(s.ok() ? std::move(result) : ResponsePayload(s.status()));
      return;
    }
  }
  SendAsync(request, request_id, client_id, deadline, std::move(done), /*counted=*/true);
}

void UcxConnection::KeepAlive(uint64_t request_id) {
  SendAsync(
      {Op::kPing, std::string()}, request_id, 0, absl::Now() + absl::Seconds(30),
      [](ResponsePayload) {}, /*counted=*/false);
}

void UcxConnection::SendAsync(const OutgoingRequest& request, uint64_t request_id,
                              uint64_t client_id, absl::Time deadline, ResponseCallback done,
                              bool counted) {
  // A keepalive that finds the window full is not needed: the requests in it keep the session
  // alive at the server.
  if (!counted && !TryTakeWindow(1)) return;
  if (counted) {
    LazyDeadline until(deadline);
    if (absl::Status room = TakeWindow(1, until); !room.ok()) {
      done(room);
      return;
    }
  }
  if (!calls_.ExpectAsync(request_id, deadline, std::move(done))) {
    ReleaseWindow(1);
    return;
  }
  {
    absl::MutexLock lock(&background_mu_);
    if (!background_.joinable() && !closing_) {
      background_ = std::thread([self = shared_from_this()]() mutable {
        // Asleep between polls until an answer comes or the earliest call's deadline.
        PollPacer pacer(self->ucx_.get(), absl::InfiniteFuture(),
                        [calls = &self->calls_] { return calls->NextAsyncDeadline(); });
        // Returns once the calls are closed (counted by Close as a detached teardown).
        self->calls_.ServeAsync([&] { return self->ProgressStep(pacer); }, absl::Milliseconds(5),
                                /*until_closed=*/true);
        self.reset();  // possibly the last reference: the teardown runs here
        EndDetachedTeardown();
      });
    }
  }
  (counted ? counters_->requests : counters_->keepalives).fetch_add(1, std::memory_order_relaxed);
  if (absl::Status sent = SendRequests({request}, {request_id}, client_id); !sent.ok()) {
    calls_.FailAsync(request_id, sent);
  }
}

ucs_status_t UcxConnection::OnResponse(void* arg, const void* /*header*/, size_t /*header_length*/,
                                       void* data, size_t length,
                                       const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxConnection*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {  // the server sends eagerly
    ucp_am_data_release(self->ucx_->worker(), data);
    self->Break(absl::UnavailableError("unexpected rendezvous message from ardmad over UCX"));
    return UCS_OK;
  }
  in_ucx_callback = true;
  self->Dispatch(std::string_view(static_cast<const char*>(data), length));
  in_ucx_callback = false;
  return UCS_OK;
}

void UcxConnection::Dispatch(std::string_view frame) {
  absl::StatusOr<wire::Frame> parsed = wire::ParseWholeFrame(frame, limits_);
  if (!parsed.ok()) {
    Break(absl::UnavailableError(
        absl::StrCat("malformed response from ardmad over UCX: ", parsed.status().message())));
    return;
  }
  counters_->bytes_received.fetch_add(frame.size(), std::memory_order_relaxed);
  ReleaseWindow(1);  // first: the call's callback may send the next request
  calls_.Complete(parsed->header.request_id, ResponseFromFrame(parsed->header, parsed->payload));
}

bool UcxConnection::TryTakeWindow(uint32_t n) {
  uint32_t now = outstanding_.load(std::memory_order_relaxed);
  do {
    // A run as long as the window goes when nothing else is outstanding.
    if (window_ != 0 && now != 0 && now + n > window_) return false;
  } while (!outstanding_.compare_exchange_weak(now, now + n, std::memory_order_relaxed));
  return true;
}

absl::Status UcxConnection::TakeWindow(uint32_t n, LazyDeadline& deadline) {
  if (TryTakeWindow(n)) return absl::OkStatus();
  if (in_ucx_callback) {
    outstanding_.fetch_add(n, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  counters_->window_waits.fetch_add(1, std::memory_order_relaxed);
  PollPacer pacer(ucx_.get());
  while (!TryTakeWindow(n)) {
    ARDMA_RETURN_IF_ERROR(calls_.failure());
    if (ProgressStep(pacer) && FastNow() >= deadline.Get()) {
      return absl::DeadlineExceededError(
          absl::StrCat("the server's limit of ", window_,
                       " requests in flight stayed reached until the deadline"));
    }
  }
  return absl::OkStatus();
}

void UcxConnection::ReleaseWindow(uint32_t n) {
  uint32_t now = outstanding_.load(std::memory_order_relaxed);
  while (
      !outstanding_.compare_exchange_weak(now, now > n ? now - n : 0, std::memory_order_relaxed)) {
  }
}

void UcxConnection::Break(const absl::Status& status) { calls_.Break(status); }

void UcxConnection::OnPeerFailure(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  static_cast<UcxConnection*>(arg)->Break(
      absl::UnavailableError(absl::StrCat("ardmad failed over UCX: ", ucs_status_string(status))));
}

bool UcxConnection::ProgressStep(PollPacer& pacer) {
  if (ucp_worker_progress(ucx_->worker()) != 0) {
    pacer.Progressed();
  } else {
    pacer.Idle();
  }
  return pacer.ClockDue();
}

}  // namespace ardma
