#include "core/server/ucx_server.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "core/security/auth.h"
#include "core/server/request_handler.h"
#include "core/clock.h"
#include "core/status_macros.h"
#include "core/wire/frame.h"
#include "core/wire/frame_reader.h"

namespace ardma {
namespace {

// The progress thread polls this long after the last event before it sleeps on the event fd.
constexpr absl::Duration kPollBeforeSleep = absl::Milliseconds(1);
// How long an idle progress thread polls before it yields its CPU between polls.
constexpr absl::Duration kSpinBeforeYield = absl::Microseconds(10);
// How often a progress thread whose sessions have requests unanswered (parked) touches their
// connections, so that --idle-timeout does not end them. Closed sessions are looked for when
// something closes (SweepNow, ConnectionClosed, Poison), not on a period: an idle thread sleeps.
constexpr absl::Duration kSweepPeriod = absl::Milliseconds(50);
// How often a thread with sessions that hold requests looks whether they have room (room made by
// other connections under the server-wide --max-queued wakes nobody).
constexpr absl::Duration kHeldPoll = absl::Milliseconds(10);
// The server's UCP context, and the address check's (which must unpack addresses as it would).
constexpr UcxContextOptions kServerContext{.wakeup = true};

}  // namespace

// One client's UCX session: the server's endpoint to its worker, bound to the connection it was
// opened on. A ResponseSink, so the RequestHandler answers it as it answers a TCP session.
//
// Every UCX call on a session's endpoint is made on its lane's progress thread: a response produced
// on another thread (a worker's EXECUTE) is queued and handed over, so no thread ever waits for the
// worker while holding a lock the progress thread may need inside a UCX callback.
//
// Limits as on a stream connection (--max-inflight, --max-queued): a session with too many
// requests unanswered, or too many answer bytes its client has not taken (UCX holds what a worker
// that does not progress has not received), is full, and the requests that arrive meanwhile are
// held and handled in order once it has room. A client never sends more than the --max-inflight
// the session's UCX_CONNECT answer announces (UcxConnection keeps that window), so only one that
// ignores it fills the hold; one that sends more than another --max-inflight requests (or
// --max-queued bytes) beyond a full session is closed as a protocol error.
class UcxServer::Session : public ResponseSink, public std::enable_shared_from_this<Session> {
 public:
  Session(Lane* lane, uint64_t id, ucp_ep_h ep, std::weak_ptr<ResponseSink> tcp,
          const wire::WireLimits& limits, std::atomic<uint64_t>* queued_total)
      : lane_(lane), id_(id), limits_(limits), ep_(ep), tcp_raw_(tcp.lock().get()),
        tcp_(std::move(tcp)) {
    tally_->total = queued_total;
  }

  void Send(std::string frame) override {
    if (std::this_thread::get_id() != lane_->thread_id) {
      lane_->Enqueue(shared_from_this(), std::move(frame));
      return;
    }
    SendNow(std::move(frame));
  }

  // On the progress thread: every frame answers one request.
  void SendNow(std::string frame) {
    if (inflight_ > 0) --inflight_;
    if (ep_ == nullptr || shut_.load(std::memory_order_acquire)) return;
    // A failure means the client has gone; the sweep will close the session.
    SendActiveMessage(ep_, kAmResponse, std::nullopt, std::move(frame), tally_).IgnoreError();
  }

  // The rest is on the progress thread only.

  // A request is handed to the handler (its answer, SendNow, counts it off).
  void Started() { ++inflight_; }
  uint32_t inflight() const { return inflight_; }
  // Too many requests unanswered, or answer bytes not taken (by this session, or with some of its
  // own by all connections together).
  bool Full() const {
    uint64_t queued = tally_->bytes.load(std::memory_order_relaxed);
    return inflight_ >= limits_.max_inflight_per_connection ||
           queued >= limits_.max_queued_bytes_per_connection ||
           (queued > 0 &&
            tally_->total->load(std::memory_order_relaxed) >= limits_.max_queued_bytes_total);
  }
  // Keeps `frame` until the session has room; false if it holds as much as it may already.
  bool Hold(std::string_view frame) {
    if (held_.size() >= limits_.max_inflight_per_connection ||
        held_bytes_ + frame.size() > limits_.max_queued_bytes_per_connection) {
      return false;
    }
    held_bytes_ += frame.size();
    held_.emplace_back(frame);
    return true;
  }
  bool holding() const { return !held_.empty(); }
  // The oldest held request, if the session has room for it now.
  std::optional<std::string> NextHeld() {
    if (held_.empty() || Full()) return std::nullopt;
    std::string frame = std::move(held_.front());
    held_.pop_front();
    held_bytes_ -= frame.size();
    return frame;
  }

  bool Open() const override {
    if (shut_.load(std::memory_order_acquire)) return false;
    std::shared_ptr<ResponseSink> tcp = tcp_.lock();
    return tcp != nullptr && tcp->Open();
  }

  // A request arrived: the bootstrap connection, which carries nothing once the session is open,
  // is not idle.
  void Touch() override {
    if (std::shared_ptr<ResponseSink> tcp = tcp_.lock()) tcp->Touch();
  }

  // A request arrived: Open, then Touch, in one look at the bootstrap connection.
  bool Arrive() {
    if (shut_.load(std::memory_order_acquire)) return false;
    std::shared_ptr<ResponseSink> tcp = tcp_.lock();
    if (tcp == nullptr || !tcp->Open()) return false;
    tcp->Touch();
    return true;
  }

  // Closes the endpoint (on its lane's thread, or once that has stopped). Idempotent.
  void Close() {
    ucp_ep_h ep = std::exchange(ep_, nullptr);
    shut_.store(true, std::memory_order_release);
    if (ep != nullptr) lane_->ucx->CloseEndpoint(ep, absl::Milliseconds(200));
  }

  // Refuses further requests and responses and closes the bootstrap connection, as a TCP
  // connection that sends a malformed frame is closed: the client sees it and reconnects. The
  // next sweep closes the session.
  void Poison() {
    if (poisoned_.exchange(true, std::memory_order_acq_rel)) return;
    shut_.store(true, std::memory_order_release);
    if (std::shared_ptr<ResponseSink> tcp = tcp_.lock()) tcp->Shutdown();
    lane_->sweep_now.store(true, std::memory_order_relaxed);  // closed at its thread's next look
    lane_->Wake();
  }

  uint64_t id() const { return id_; }
  Lane* lane() const { return lane_; }
  bool Uses(ucp_ep_h ep) const { return ep_ == ep; }

 private:
  Lane* const lane_;
  const uint64_t id_;
  const wire::WireLimits& limits_;
  const std::shared_ptr<SendTally> tally_ = std::make_shared<SendTally>();
  uint32_t inflight_ = 0;
  std::deque<std::string> held_;
  uint64_t held_bytes_ = 0;
  // The endpoint: set before the session is published, then used and closed on its lane's thread
  // only (or once that has stopped), so no lock.
  ucp_ep_h ep_;
  std::atomic<bool> poisoned_{false};
  std::atomic<bool> shut_{false};  // closed or poisoned: no more requests or answers
  const ResponseSink* const tcp_raw_;  // (compared with closing connections only)
  const std::weak_ptr<ResponseSink> tcp_;

 public:
  bool BootstrappedBy(const ResponseSink* connection) const { return tcp_raw_ == connection; }
};

absl::StatusOr<std::unique_ptr<UcxServer>> UcxServer::Create(int progress_threads) {
  if (progress_threads < 1) return absl::InvalidArgumentError("UCX needs a progress thread");
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<UcxContext> ucx, UcxContext::Create(kServerContext));
  auto server = std::unique_ptr<UcxServer>(new UcxServer(std::move(ucx)));
  server->address_check_ = std::make_unique<UcxAddressCheck>(kServerContext);
  for (int i = 0; i < progress_threads; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->server = server.get();
    lane->index = static_cast<size_t>(i);
    if (i == 0) {
      lane->ucx = server->ucx_;
    } else {
      ARDMA_ASSIGN_OR_RETURN(lane->ucx, server->ucx_->AnotherWorker());
    }
    server->lanes_.push_back(std::move(lane));
  }
  return server;
}

UcxServer::~UcxServer() { Stop(); }

absl::StatusOr<std::unique_ptr<Region>> UcxServer::AllocateRegion(uint64_t size) {
  ARDMA_ASSIGN_OR_RETURN(UcxContext::Mapping m, ucx_->Allocate(size));
  allocated_[m.base] = m.memh;
  std::shared_ptr<UcxContext> ucx = ucx_;  // the region may outlive this server
  return Region::Adopt(m.base, size, /*read_only=*/false,
                       [ucx, memh = m.memh] { ucx->Unmap(memh); });
}

absl::Status UcxServer::Start(const RegionTable& regions, RequestHandler* handler) {
  handler_ = handler;
  for (RegionId id = 0; id < regions.size(); ++id) {
    ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions.Get(id));
    RegionEntry e;
    e.key.region = id;
    e.key.base = reinterpret_cast<uint64_t>(region->data());
    e.key.size = region->size();
    e.key.read_only = region->read_only();
    auto it = allocated_.find(region->data());
    if (it != allocated_.end()) {
      e.memh = it->second;
    } else {
      ARDMA_ASSIGN_OR_RETURN(e.memh, ucx_->Register(region->data(), region->size()));
      e.registered_here = true;
    }
    absl::StatusOr<std::string> rkey = ucx_->PackRkey(e.memh);
    if (!rkey.ok()) {
      if (e.registered_here) ucx_->Unmap(e.memh);
      return rkey.status();
    }
    e.key.rkey = *std::move(rkey);
    regions_.push_back(std::move(e));
  }
  if (absl::Status warm = address_check_->Warm(); !warm.ok()) {
    ARDMA_LOG(kWarning, "%s; UCX clients will be refused until it starts",
              std::string(warm.message()));
  }
  for (std::unique_ptr<Lane>& lane : lanes_) {
    ARDMA_RETURN_IF_ERROR(lane->ucx->SetAmHandler(kAmRequest, &UcxServer::OnRequest, lane.get()));
    lane->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (lane->wake_fd < 0) return absl::InternalError("eventfd for a UCX progress thread");
  }
  for (std::unique_ptr<Lane>& lane : lanes_) {
    lane->thread = std::thread([this, lane = lane.get()] { ProgressLoop(*lane); });
    lane->thread_id = lane->thread.get_id();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> UcxServer::Connect(std::string_view payload,
                                               const std::shared_ptr<ResponseSink>& tcp) {
  if (stopping_.load()) return absl::UnavailableError("the server is stopping");
  ARDMA_ASSIGN_OR_RETURN(wire::UcxConnectRequest request, wire::DecodeUcxConnectRequest(payload));
  std::string_view client_address = request.worker_address;
  // UCX asserts on some malformed addresses: they are unpacked in another process first.
  ARDMA_RETURN_IF_ERROR(address_check_->Check(client_address));
  Lane& lane = PickLane();
  // Peer error handling as the client's endpoint has it (both ends must agree).
  std::optional<ucp_err_handler_t> on_failure;
  if (request.peer_error_handling) on_failure = ucp_err_handler_t{&UcxServer::OnPeerFailure, &lane};
  ARDMA_ASSIGN_OR_RETURN(ucp_ep_h ep, lane.ucx->Connect(client_address, absl::InfinitePast(),
                                                        on_failure, /*force_peer=*/true));
  wire::UcxHello hello;
  ARDMA_ASSIGN_OR_RETURN(hello.worker_address, lane.ucx->WorkerAddress());
  hello.max_inflight = handler_->limits().max_inflight_per_connection;
  // A key is a mapping of the region (on shared memory the client writes it like its own), so it
  // goes only to a connection that may write the region, or read one that nobody may write;
  // anything else goes through the server, which checks (docs/SECURITY.md).
  const security::Grant* grant = tcp->auth().Granted();
  for (const RegionEntry& e : regions_) {
    wire::UcxRegionKey key = e.key;
    bool keyed = grant != nullptr && grant->MayRead(key.region) &&
                 (grant->MayWrite(key.region) || key.read_only);
    if (!keyed) key.rkey.clear();
    hello.regions.push_back(std::move(key));
  }
  {
    absl::MutexLock lock(&mu_);
    // Active messages name their session by this number: random, so that it cannot be guessed
    // by another client of this worker.
    do {
      hello.session = security::RandomU64();
    } while (hello.session == 0 || sessions_.contains(hello.session));
    auto session = std::make_shared<Session>(&lane, hello.session, ep, tcp, handler_->limits(),
                                             &handler_->counters().queued_bytes);
    RequestHandler::InheritAuth(*tcp, *session);
    sessions_[hello.session] = std::move(session);
  }
  lane.Wake();  // the new endpoint's wire-up wants progress
  std::string out;
  wire::EncodeUcxHello(hello, &out);
  return out;
}

absl::StatusOr<std::string> UcxServer::Add(wire::RegionId id, const Region& region) {
  RegionEntry e;
  e.key.region = id;
  e.key.base = reinterpret_cast<uint64_t>(region.data());
  e.key.size = region.size();
  e.key.read_only = region.read_only();
  ARDMA_ASSIGN_OR_RETURN(e.memh, ucx_->Register(const_cast<char*>(region.data()), region.size()));
  e.registered_here = true;
  absl::StatusOr<std::string> rkey = ucx_->PackRkey(e.memh);
  if (!rkey.ok()) {
    ucx_->Unmap(e.memh);
    return rkey.status();
  }
  e.key.rkey = *rkey;
  absl::MutexLock lock(&dynamic_mu_);
  dynamic_[id] = std::move(e);
  return *rkey;
}

void UcxServer::Remove(wire::RegionId id) {
  ucp_mem_h memh = nullptr;
  {
    absl::MutexLock lock(&dynamic_mu_);
    auto it = dynamic_.find(id);
    if (it == dynamic_.end()) return;
    memh = it->second.memh;
    dynamic_.erase(it);
  }
  ucx_->Unmap(memh);
}

std::string UcxServer::Rkey(wire::RegionId id) const {
  if (id < regions_.size()) return regions_[id].key.rkey;
  absl::MutexLock lock(&dynamic_mu_);
  auto it = dynamic_.find(id);
  return it == dynamic_.end() ? std::string() : it->second.key.rkey;
}

size_t UcxServer::sessions() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

std::vector<UcxServer::ThreadLoad> UcxServer::threads() const {
  std::vector<ThreadLoad> out(lanes_.size());
  for (size_t i = 0; i < lanes_.size(); ++i) {
    out[i].stuck = handler_ != nullptr && handler_->IoThreadStuck(lanes_[i]->busy);
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [id, session] : sessions_) ++out[session->lane()->index].sessions;
  return out;
}

void UcxServer::OnPeerFailure(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* lane = static_cast<Lane*>(arg);
  std::shared_ptr<Session> failed;
  {
    absl::MutexLock lock(&lane->server->mu_);
    for (const auto& [id, session] : lane->server->sessions_) {
      if (session->lane() == lane && session->Uses(ep)) failed = session;
    }
  }
  if (failed == nullptr) return;
  ARDMA_LOG(kDebug, "ucx session ...%04x: its client failed (%s); closing it",
            failed->id() & 0xffff, ucs_status_string(status));
  failed->Poison();
}

void UcxServer::SweepNow() {
  for (std::unique_ptr<Lane>& lane : lanes_) {
    lane->sweep_now.store(true, std::memory_order_relaxed);
    lane->Wake();
  }
}

UcxServer::Lane& UcxServer::PickLane() {
  size_t first = next_lane_.fetch_add(1, std::memory_order_relaxed);
  for (size_t k = 0; k < lanes_.size(); ++k) {
    Lane& lane = *lanes_[(first + k) % lanes_.size()];
    if (!handler_->IoThreadStuck(lane.busy)) return lane;
  }
  return *lanes_[first % lanes_.size()];  // all stuck: still in turn
}

std::shared_ptr<UcxServer::Session> UcxServer::FindSession(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

ucs_status_t UcxServer::OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                  size_t length, const ucp_am_recv_param_t* param) {
  auto* lane = static_cast<Lane*>(arg);
  UcxServer* self = lane->server;
  uint64_t id = 0;
  if (header_length == sizeof(id)) std::memcpy(&id, header, sizeof(id));
  Session* session = nullptr;
  if (auto known = lane->known.find(id); known != lane->known.end()) {
    session = known->second.get();
  } else if (std::shared_ptr<Session> found = self->FindSession(id);
             found != nullptr && found->lane() == lane) {  // its requests come to its own lane
    session = found.get();
    lane->known.emplace(id, std::move(found));
  }
  // Clients send eagerly (see Session::Send); a rendezvous or an oversized message is not ours.
  bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  if (session == nullptr || rendezvous) {
    self->handler_->counters().Add(Stat::kProtocolErrors, 1);
    if (rendezvous) ucp_am_data_release(lane->ucx->worker(), data);
    if (session != nullptr) session->Poison();
    return UCS_OK;
  }
  self->Arrived(session, std::string_view(static_cast<const char*>(data), length));
  return UCS_OK;
}

void UcxServer::Arrived(Session* session, std::string_view frame) {
  if (!session->Arrive()) return;  // closing: what it sends now is dropped
  if (!session->holding() && !session->Full()) {
    HandleFrame(session, frame);
    return;
  }
  // Full (or already holding: requests are handled in order).
  if (!session->Hold(frame)) {
    handler_->counters().Add(Stat::kUcxOverruns, 1);
    handler_->counters().Add(Stat::kProtocolErrors, 1);
    ARDMA_LOG(kWarning,
              "ucx session ...%04x sent more than %u requests beyond its limit; closing it",
              session->id() & 0xffff, handler_->limits().max_inflight_per_connection);
    session->Poison();
    return;
  }
  handler_->counters().Add(Stat::kUcxHeld, 1);
  Lane& lane = *session->lane();
  if (std::none_of(lane.holding.begin(), lane.holding.end(),
                   [&](const std::shared_ptr<Session>& s) { return s.get() == session; })) {
    lane.holding.push_back(session->shared_from_this());
  }
}

bool UcxServer::HandleHeld(Lane& lane) {
  bool handled = false;
  for (auto it = lane.holding.begin(); it != lane.holding.end();) {
    const std::shared_ptr<Session>& session = *it;
    while (session->Open()) {
      std::optional<std::string> frame = session->NextHeld();
      if (!frame.has_value()) break;
      HandleFrame(session.get(), *frame);
      handled = true;
    }
    if (!session->Open() || !session->holding()) {
      it = lane.holding.erase(it);
    } else {
      ++it;
    }
  }
  return handled;
}

void UcxServer::HandleFrame(Session* session, std::string_view frame) {
  absl::StatusOr<wire::Frame> parsed = wire::ParseWholeFrame(frame, handler_->limits());
  if (!parsed.ok()) {
    // As a TCP session that sends a malformed frame is answered (if the frame names a request)
    // and closed, so is this one.
    handler_->counters().Add(Stat::kProtocolErrors, 1);
    std::string answer = wire::ErrorResponseForHeader(frame, parsed.status());
    if (!answer.empty()) {
      session->Started();
      session->SendNow(std::move(answer));  // on the progress thread
    }
    ARDMA_LOG(kWarning, "ucx session ...%04x: %s; closing it", session->id() & 0xffff,
              std::string(parsed.status().message()));
    session->Poison();
    return;
  }
  session->Started();
  handler_->Handle(parsed->header, parsed->payload, session->shared_from_this());
}

void UcxServer::Lane::Enqueue(std::shared_ptr<Session> session, std::string frame) {
  {
    absl::MutexLock lock(&send_mu);
    send_queue.emplace_back(std::move(session), std::move(frame));
    queued.store(true, std::memory_order_release);
  }
  Wake();
}

void UcxServer::Lane::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd, &one, sizeof(one));
}

bool UcxServer::Lane::SendQueued() {
  if (!queued.load(std::memory_order_acquire)) return false;
  std::vector<std::pair<std::shared_ptr<Session>, std::string>> queue;
  {
    absl::MutexLock lock(&send_mu);
    queue.swap(send_queue);
    queued.store(false, std::memory_order_relaxed);
  }
  for (auto& [session, frame] : queue) session->SendNow(std::move(frame));
  return !queue.empty();
}

void UcxServer::ProgressLoop(Lane& lane) {
  ::pthread_setname_np(::pthread_self(), absl::StrCat("ardma-ucx-", lane.index).c_str());
  RequestHandler::SetIoBusyStamp(&lane.busy);
  ucp_worker_h worker = lane.ucx->worker();
  const int wake_fd = lane.wake_fd;
  int efd = -1;
  int epfd = ::epoll_create1(EPOLL_CLOEXEC);
  bool sleep_ok = epfd >= 0 && ucp_worker_get_efd(worker, &efd) == UCS_OK;
  for (int fd : {efd, wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (sleep_ok && ::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) sleep_ok = false;
  }
  absl::Time last_event = FastNow(), next_sweep = FastNow() + kSweepPeriod;
  // Work since the clock was last read: the clock is read when idle, not once per request.
  bool busy_since = false;
  for (uint64_t spins = 0; !stopping_.load(std::memory_order_relaxed); ++spins) {
    bool busy = ucp_worker_progress(worker) != 0;
    busy |= lane.SendQueued();
    busy |= HandleHeld(lane);
    if (busy) {
      busy_since = true;
      continue;
    }
    if ((spins & 15) != 0) continue;
    absl::Time now = FastNow();
    if (std::exchange(busy_since, false)) last_event = now;
    // Idle a while (not just between a client's answer and its next call): let a thread with
    // work run on this CPU. On a machine with fewer cores than busy threads (clients, other
    // servers) a pure spin would take the rest of its time slice from them.
    if (now - last_event >= kSpinBeforeYield) ::sched_yield();
    if ((spins & 255) != 0) continue;
    if (now >= next_sweep || lane.sweep_now.exchange(false, std::memory_order_relaxed)) {
      bool waiting = CloseSessions(&lane, /*all=*/false);
      next_sweep = waiting ? now + kSweepPeriod : absl::InfiniteFuture();
    }
    if (now - last_event < kPollBeforeSleep) continue;
    // Idle: sleep until UCX traffic, a queued response or the next sweep.
    if (!sleep_ok) {
      absl::SleepFor(absl::Microseconds(100));
      continue;
    }
    if (ucp_worker_arm(worker) == UCS_ERR_BUSY) continue;
    epoll_event events[2];
    // A session held back by the server-wide limit looks again as a stream connection does;
    // else the thread sleeps until traffic, a wake, or (requests parked) the next sweep.
    int timeout_ms = -1;
    if (!lane.holding.empty()) {
      timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(kHeldPoll));
    } else if (next_sweep != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(
          absl::ToInt64Milliseconds(std::max(next_sweep - now, absl::Milliseconds(1))));
    }
    int n = ::epoll_wait(epfd, events, 2, timeout_ms);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd) {
        uint64_t count;
        (void)!::read(wake_fd, &count, sizeof(count));
      }
    }
    // Poll again only after an event: a timeout (time to sweep) goes straight back to sleep,
    // else an idle server would spin for kPollBeforeSleep every kSweepPeriod (2% of a CPU).
    if (n > 0) last_event = FastNow();
  }
  lane.SendQueued();
  if (epfd >= 0) ::close(epfd);
}

bool UcxServer::CloseSessions(const Lane* lane, bool all) {
  std::vector<std::shared_ptr<Session>> closing;
  bool waiting = false;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) {
      if (all || (session->lane() == lane && !session->Open())) {
        closing.push_back(session);
      } else if (session->lane() == lane && session->inflight() > 0) {
        // A session whose requests are not all answered (parked) is not idle: its bootstrap
        // connection carries nothing, and its idle timer must not end it.
        session->Touch();
        waiting = true;
      }
    }
  }
  // A session counts (sessions()) until its close hooks have run and its endpoint is closed.
  for (const std::shared_ptr<Session>& s : closing) {
    if (handler_ != nullptr) handler_->ConnectionClosed(s.get());
    s->Close();
  }
  for (const std::shared_ptr<Session>& s : closing) s->lane()->known.erase(s->id());
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<Session>& s : closing) sessions_.erase(s->id());
  return waiting;
}

void UcxServer::ConnectionClosed(const ResponseSink* connection) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, session] : sessions_) {
    if (session->BootstrappedBy(connection)) {
      session->lane()->sweep_now.store(true, std::memory_order_relaxed);
      session->lane()->Wake();
    }
  }
}

void UcxServer::Stop() {
  if (stopping_.exchange(true)) return;
  for (std::unique_ptr<Lane>& lane : lanes_) {
    if (lane->wake_fd >= 0) lane->Wake();
  }
  for (std::unique_ptr<Lane>& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  for (std::unique_ptr<Lane>& lane : lanes_) lane->holding.clear();
  CloseSessions(nullptr, /*all=*/true);
  for (const RegionEntry& e : regions_) {
    if (e.registered_here) ucx_->Unmap(e.memh);
  }
  regions_.clear();
  {
    absl::MutexLock lock(&dynamic_mu_);
    for (auto& [id, e] : dynamic_) ucx_->Unmap(e.memh);
    dynamic_.clear();
  }
  for (std::unique_ptr<Lane>& lane : lanes_) {
    if (lane->wake_fd >= 0) ::close(lane->wake_fd);
    lane->wake_fd = -1;
  }
}

}  // namespace ardma
