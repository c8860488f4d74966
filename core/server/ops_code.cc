// The code ops: HAS_CODE, LOAD and EXECUTE, and where an EXECUTE runs (Start: inline on the I/O
// thread, or on the worker pool; isolated or not, decided once per call).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/active/local_context.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/server/op_support.h"
#include "core/server/request_handler.h"
#include "core/status_macros.h"

namespace ardma {

using ops::LatencyRecorder;
using ops::NowNs;
using wire::FrameHeader;
using wire::Op;

// Answers one EXECUTE, now or later (parked), records it in the de-duplication window, and tells
// whether its connection still listens.
class RequestHandler::ExecuteResponder : public Responder {
 public:
  ExecuteResponder(RequestHandler* handler, std::shared_ptr<ResponseSink> sink,
                   const FrameHeader& header, bool deduplicated, uint64_t start_ns)
      : handler_(handler),
        sink_(std::move(sink)),
        header_(header),
        deduplicated_(deduplicated),
        start_ns_(start_ns) {}

  void Respond(absl::StatusOr<std::string> result) override {
    RespondAt(std::move(result), NowNs());
  }
  void RespondAt(absl::StatusOr<std::string> result, uint64_t steady_ns) override {
    // The answer first: a retry that comes meanwhile finds the request running, waits, and is
    // answered by Finish all the same.
    handler_->ReplyResult(sink_, header_, result);
    if (deduplicated_) handler_->dedup_.Finish(header_.client_id, header_.request_id, result);
    handler_->counters_.Latency(static_cast<uint8_t>(wire::Op::kExecute))
        .Record(ElapsedNs(start_ns_, steady_ns));
  }
  bool Alive() const override { return sink_->Open(); }

 private:
  RequestHandler* const handler_;
  const std::shared_ptr<ResponseSink> sink_;
  const FrameHeader header_;
  const bool deduplicated_;
  const uint64_t start_ns_;
};

absl::Status RequestHandler::HasCode(const Request& request, std::string* out) {
  ARDMA_ASSIGN_OR_RETURN(wire::CodeHash hash, wire::DecodeHash(request.payload));
  wire::EncodeHasCodeResponse(registry_->Has(hash), out);
  return absl::OkStatus();
}

absl::Status RequestHandler::Load(const Request& request, std::string*) {
  const FrameHeader& header = request.header;
  std::string_view payload = request.payload;
  const std::shared_ptr<ResponseSink>& sink = request.sink;
  const uint64_t start_ns = request.start_ns;
  LatencyRecorder recorder(&counters_.Latency(static_cast<uint8_t>(Op::kLoad)), start_ns);
  absl::StatusOr<wire::LoadRequest> req = wire::DecodeLoadRequest(payload);
  if (!req.ok()) {
    ReplyError(sink, header, req.status());
    return absl::OkStatus();
  }
  // Who loads decides which names the code may take over (docs/SECURITY.md).
  LoadAuthority by;
  if (const security::Grant* grant = sink->auth().Granted(); grant != nullptr) {
    by.owner = sink->auth().name;
    by.may_repoint = grant->Has(security::kAdmin);
  }
  auto load = [this, header, sink, by, start_ns](const wire::LoadRequest& r) {
    LatencyRecorder loaded(&counters_.Latency(static_cast<uint8_t>(Op::kLoad)), start_ns);
    LoadAuthority with_deps = by;
    with_deps.deps = r.deps;
    std::string_view code = r.code;
    bool known = registry_->Has(Sha256(code));
    absl::StatusOr<wire::CodeHash> hash = registry_->Load(r.kind, r.library_name, code, with_deps);
    if (hash.ok() && !known) {
      ARDMA_LOG(
          kInfo, "loaded %s code %s (%u bytes%s) for client %016x%s", wire::CodeKindName(r.kind),
          wire::HashToHex(*hash).substr(0, 16), code.size(),
          r.library_name.empty() ? "" : absl::StrCat(", library ", std::string(r.library_name)),
          header.client_id,
          sink->auth().name.empty() ? "" : absl::StrCat(" as '", sink->auth().name, "'"));
    }
    if (!hash.ok()) {
      ARDMA_LOG(kWarning, "LOAD of %u bytes failed: %s", code.size(), hash.status().ToString());
      ReplyError(sink, header, hash.status());
      return;
    }
    std::string out;
    wire::EncodeHash(*hash, &out);
    Reply(sink, ops::OkFrame(header, out));
  };
  // Known code, or no pool: answer here. New code is loaded on a worker (dlopen can be slow).
  recorder.Dismiss();  // `load` records it, here or on a worker
  if (workers_ == nullptr || registry_->Has(Sha256(req->code))) {
    load(*req);
    return absl::OkStatus();
  }
  auto owned = std::make_shared<std::string>(payload);
  WorkerPool::Job job;
  job.run = [owned, load] { load(*wire::DecodeLoadRequest(*owned)); };
  job.expired = [this, header, sink] {
    ReplyError(sink, header, absl::UnavailableError("server is shutting down"));
  };
  if (!workers_->Submit(std::move(job))) {
    ReplyError(sink, header, absl::ResourceExhaustedError("worker queue is full"));
  }
  return absl::OkStatus();
}

absl::Status RequestHandler::Execute(const Request& request, std::string*) {
  const FrameHeader& header = request.header;
  wire::ExecuteRequest req;
  if (absl::Status s = wire::DecodeExecuteRequest(request.payload, &req); !s.ok()) {
    ReplyError(request.sink, header, s);
    return absl::OkStatus();
  }
  const bool from_peer = (header.flags & wire::kFlagPeer) != 0;
  if (from_peer && !request.grant.Has(security::kPeer)) {
    counters_.Add(Stat::kPeerRefused, 1);
    counters_.Add(Stat::kPermissionDenied, 1);
    ReplyError(request.sink, header,
               absl::PermissionDeniedError(
                   absl::StrCat("a call of ", std::string(req.function),
                                " claims to come from a member of the cluster, "
                                "but this connection's credentials lack the 'peer' permission")));
    return absl::OkStatus();
  }
  if (from_peer) counters_.Add(Stat::kPeerCallsIn, 1);
  std::optional<ReplicaOrder> apply;
  std::optional<std::vector<ReplicaOrder>> base;  // a fill's (kReplicaBaseFunction)
  if ((header.flags & wire::kFlagReplica) != 0) {
    absl::Status refused;
    if (!from_peer || options_.replication == nullptr) {
      refused = absl::FailedPreconditionError(
          !from_peer ? "only a member of the cluster applies its writes to a replica"
                     : "this server keeps no replicas (it is not a member of a cluster)");
    } else if (req.function == std::string_view(kReplicaBaseFunction)) {
      absl::StatusOr<std::vector<ReplicaOrder>> marks = DecodeReplicaBase(req.args);
      refused = marks.status();
      if (marks.ok()) base = *std::move(marks);
    } else {
      absl::StatusOr<std::pair<ReplicaOrder, std::string_view>> order =
          DecodeReplicaOrder(req.args);
      refused = order.status();
      if (order.ok()) {
        apply = order->first;
        req.args = order->second;
      }
    }
    if (!refused.ok()) {
      ReplyError(request.sink, header, refused);
      return absl::OkStatus();
    }
  }
  const bool deduplicate = header.client_id != 0;
  std::shared_ptr<Responder> responder =
      std::make_shared<ExecuteResponder>(this, request.sink, header, deduplicate, request.start_ns);
  if (deduplicate && !AdmitOnce(header, request.sink)) return absl::OkStatus();
  if (base.has_value()) {
    for (const ReplicaOrder& mark : *base) options_.replication->SetBase(mark);
    responder->Respond(std::string());
    return absl::OkStatus();
  }
  if (apply.has_value()) {
    // In the primary's order, once: a write already applied (a retry) is answered as done; one
    // after a gap is refused.
    absl::StatusOr<bool> admitted = options_.replication->Admit(*apply);
    if (!admitted.ok() || !*admitted) {
      if (!admitted.ok()) counters_.Add(Stat::kReplicaRefused, 1);
      responder->Respond(admitted.ok() ? absl::StatusOr<std::string>("") : admitted.status());
      return absl::OkStatus();
    }
  }
  absl::StatusOr<BoundFunction> fn =
      registry_->ResolveRemembered(req.by_hash ? &req.hash : nullptr, req.function);
  if (absl::IsNotFound(fn.status()) && from_peer && !req.by_hash &&
      LoadBuiltInFor(req.function)) {
    fn = registry_->ResolveRemembered(nullptr, req.function);
  }
  if (!fn.ok()) {
    responder->Respond(fn.status());
    return absl::OkStatus();
  }
  // (Counted from the request's arrival, which is stamped already: no clock read here.)
  absl::Time deadline =
      WallAt(static_cast<int64_t>(request.start_ns)) +
      (req.timeout_us == 0 ? options_.default_deadline
                           : absl::Microseconds(static_cast<int64_t>(
                                 std::min<uint64_t>(req.timeout_us, INT64_MAX / 2))));
  Start({*fn, req.args, deadline, responder, request.sink, Isolated(*fn, request.sink.get()),
         MayWrite(request.sink.get()), from_peer, apply,
         (header.flags & wire::kFlagStaleRead) != 0, request.start_ns},
        /*may_inline=*/true);
  return absl::OkStatus();
}

bool RequestHandler::LoadBuiltInFor(std::string_view function) {
  for (const ActiveLibrary* service : options_.built_in_services) {
    if (service->Find(function) == nullptr) continue;
    // Its dependencies first, each under its own name, as a client's EnsureLoaded ships them.
    std::function<absl::Status(const ActiveLibrary&)> load =
        [&](const ActiveLibrary& library) -> absl::Status {
      LoadAuthority by;
      for (const ActiveLibrary* dep : library.deps()) {
        ARDMA_RETURN_IF_ERROR(load(*dep));
        by.deps.push_back(dep->hash());
      }
      if (registry_->Has(library.hash())) return absl::OkStatus();
      return registry_->Load(library.kind(), library.name(), library.code(), by).status();
    };
    if (absl::Status loaded = load(*service); !loaded.ok()) {
      ARDMA_LOG(kWarning, "loading the built-in service %s for a peer's call of %s: %s",
                std::string(service->name()), std::string(function), loaded.message());
      return false;
    }
    ARDMA_LOG(kInfo, "loaded the built-in service %s for a peer's call of %s",
              std::string(service->name()), std::string(function));
    return true;
  }
  return false;
}

namespace {

// The steady clock as the stamps keep it (signed); the same clock as a request's arrival
// (NowNs), which a call run as it arrives is timed from.
int64_t SteadyNanos() { return static_cast<int64_t>(NowNs()); }

thread_local std::atomic<int64_t>* io_busy_stamp = nullptr;

// A run on an I/O thread that overran: the `limit`th in a row sends the function to the pool for
// good. (One overrun alone may be the machine's doing: a preempted thread.)
void MarkOverran(const BoundFunction& fn, int64_t ns, int limit) {
  uint32_t in_a_row = fn.stats().overruns.fetch_add(1, std::memory_order_relaxed) + 1;
  if (in_a_row < static_cast<uint32_t>(limit)) return;
  if (!fn.stats().never_inline.exchange(true, std::memory_order_relaxed)) {
    ARDMA_LOG(kWarning,
              "%s overran on an I/O thread %u times in a row (the last run took %s); from now on "
              "it runs on the worker pool",
              std::string(fn.name()), in_a_row, absl::FormatDuration(absl::Nanoseconds(ns)));
  }
}

}  // namespace

void RequestHandler::SetIoBusyStamp(std::atomic<int64_t>* stamp) { io_busy_stamp = stamp; }

bool RequestHandler::IoThreadStuck(const std::atomic<int64_t>& stamp) const {
  int64_t since = stamp.load(std::memory_order_relaxed);
  return since != 0 && absl::Nanoseconds(SteadyNanos() - since) > options_.inline_overrun;
}

// Whether `fn`, called on `sink`'s connection (null: a close hook), runs in an isolated worker.
bool RequestHandler::Isolated(const BoundFunction& fn, const ResponseSink* sink) const {
  if (isolated_ == nullptr || !isolated_->Isolates(fn)) return false;
  if (isolate_all_) return true;
  // Only admins' and the cluster's other members' code runs in the server; a close hook's (no
  // connection any more) does not.
  const security::Grant* grant = sink != nullptr ? sink->auth().Granted() : nullptr;
  return grant == nullptr || !(grant->Has(security::kAdmin) || grant->Has(security::kPeer));
}

// Whether code called on `sink`'s connection may write memory (as the caller may one-sidedly):
// an isolated worker maps the heap read-only otherwise. (A close hook keeps its connection's.)
bool RequestHandler::MayWrite(const ResponseSink* sink) const {
  if (options_.auth == nullptr) return true;
  const security::Grant* grant = sink != nullptr ? sink->auth().Granted() : nullptr;
  return grant != nullptr && grant->Has(security::kWrite);
}

// Only a function known to be short: seen before, short on average and last time, never overran
// on an I/O thread, and not running long there right now.
bool RequestHandler::MayRunInline(const BoundFunction& fn) const {
  FunctionStats& stats = fn.stats();
  if (stats.never_inline.load(std::memory_order_relaxed)) return false;
  int64_t since = stats.inline_since_ns.load(std::memory_order_relaxed);
  if (since != 0) {
    int64_t running = SteadyNanos() - since;
    if (absl::Nanoseconds(running) > options_.inline_overrun) return false;
  }
  auto short_run = [this](const std::atomic<uint64_t>& ns) {
    return absl::Nanoseconds(ns.load(std::memory_order_relaxed)) < options_.inline_threshold;
  };
  return stats.calls.load(std::memory_order_relaxed) > 0 && short_run(stats.average_ns) &&
         short_run(stats.last_ns);
}

void RequestHandler::Start(const Call& call, bool may_inline, bool replicating) {
  // (An isolated call runs here too if it is known to be short: Run hands its wait to the pool
  // if its worker is busy or the call outlasts an inline run.)
  // A replica's apply runs as it arrives (it waits for nothing: its primary checked the slot),
  // whatever its primary's runs of the function taught this server.
  const bool apply = call.apply.has_value();
  const bool here = workers_ == nullptr || (may_inline && (apply || MayRunInline(call.fn)));
  if (may_inline) {
    counters_.Add(here ? Stat::kExecutesInline : Stat::kExecutesPooled, 1);
  }
  if (here) {
    Run(call, /*on_worker=*/workers_ == nullptr);  // without workers every run may sleep
    return;
  }
  WorkerPool::Job job;
  job.deadline = call.deadline;
  job.run = [this, fn = call.fn, args = std::string(call.args), deadline = call.deadline,
             responder = call.responder, sink = call.sink, isolated = call.isolated,
             writable = call.writable, from_peer = call.from_peer, apply = call.apply,
             stale_read = call.stale_read] {
    Run({fn, args, deadline, responder, sink, isolated, writable, from_peer, apply, stale_read},
        /*on_worker=*/true);
  };
  job.expired = [this, responder = call.responder] {
    counters_.Add(Stat::kExecutesExpired, 1);
    responder->Respond(absl::DeadlineExceededError("deadline passed before the function started"));
  };
  WorkerPool* pool = workers_.get();
  if (apply && apply_workers_ != nullptr) pool = apply_workers_.get();
  if (replicating && replicating_workers_ != nullptr) pool = replicating_workers_.get();
  if (!pool->Submit(std::move(job))) {
    counters_.Add(Stat::kExecutesRejected, 1);
    call.responder->Respond(absl::ResourceExhaustedError("worker queue is full"));
  }
}

// RequestHost for one run of an EXECUTE (or of a close hook, which has no connection).
class RequestHandler::Host : public RequestHost {
 public:
  Host(RequestHandler* handler, const Call& call) : handler_(handler), call_(call) {}

  ParkingLot::ResumeFn MakeResume(std::string args) override {
    return [handler = handler_, fn = call_.fn, args = std::move(args), deadline = call_.deadline,
            responder = call_.responder, sink = call_.sink, isolated = call_.isolated,
            writable = call_.writable, from_peer = call_.from_peer, apply = call_.apply,
            stale_read = call_.stale_read] {
      handler->counters_.Add(Stat::kExecutesResumed, 1);
      handler->Start(
          {fn, args, deadline, responder, sink, isolated, writable, from_peer, apply, stale_read},
          /*may_inline=*/false);
    };
  }
  absl::Status OnClose(std::string_view key, std::string_view function,
                       std::string_view args) override {
    if (call_.sink == nullptr)
      return absl::FailedPreconditionError("a close hook has no connection");
    return handler_->SetCloseHook(call_.sink, key, function, args);
  }

 private:
  RequestHandler* const handler_;
  const Call& call_;
};

void RequestHandler::Prepare(Execution& ex, const Call& call, RequestHost* host, bool on_worker) {
  ex.regions = regions_;
  ex.registry = registry_;
  ex.parking = &parking_;
  ex.responder = &call.responder;
  ex.host = host;
  ex.deadline = call.deadline;
  ex.cancelled = &cancelled_;
  if (owners_ != nullptr) ex.owner = owners_->server();
  ex.may_block = on_worker;
  ex.access_cost = options_.access_cost;
  ex.peers = options_.peers;
  ex.from_peer = call.from_peer;
  ex.replication = options_.replication;
  ex.replica_apply = call.apply.has_value();
  ex.stale_read = call.stale_read;
}

void RequestHandler::Run(const Call& call, bool on_worker) {
  const BoundFunction& fn = call.fn;
  Host host(this, call);
  Execution ex;
  Prepare(ex, call, &host, on_worker);
  // Inline on an I/O thread where there are workers: the function's run is stamped, so a run
  // that does not end sends the next caller to the pool.
  bool inlined = !on_worker;
  // (A call run as it arrives is timed from its arrival: one clock read fewer per call.)
  int64_t start = call.arrived_ns != 0 ? static_cast<int64_t>(call.arrived_ns) : SteadyNanos();
  bool stamped = false;
  if (inlined) {
    int64_t idle = 0;
    stamped =
        fn.stats().inline_since_ns.compare_exchange_strong(idle, start, std::memory_order_relaxed);
  }
  // On an I/O thread (or a UCX progress thread), with or without workers: the thread is stamped,
  // so one that is stuck in a run gets no new connection (Server's PickIo, UcxServer's PickLane).
  if (io_busy_stamp != nullptr) io_busy_stamp->store(start, std::memory_order_relaxed);
  auto unstamp = [&] {
    if (io_busy_stamp != nullptr) io_busy_stamp->store(0, std::memory_order_relaxed);
    if (stamped) fn.stats().inline_since_ns.store(0, std::memory_order_relaxed);
  };
  absl::StatusOr<std::string> result;
  if (call.isolated && inlined) {
    // The worker is called from this thread; if no idle one has the code, or the call is still
    // running when an inline run's time is up, a pool thread waits instead of this one.
    std::unique_ptr<IsolatedPool::InFlight> in_flight;
    switch (isolated_->TryRun(fn, call.args, ex, call.writable,
                              absl::Now() + options_.inline_overrun, &result, &in_flight)) {
      case IsolatedPool::Tried::kNotStarted:
        unstamp();
        Start(call, /*may_inline=*/false);
        return;
      case IsolatedPool::Tried::kStillRunning:
        unstamp();
        MarkOverran(fn, static_cast<int64_t>(ElapsedNs(start, SteadyNanos())),
                    options_.overruns_to_pool);
        HandOff(call, std::move(in_flight), ex, start);
        return;
      case IsolatedPool::Tried::kDone:
        break;
    }
  } else {
    result = call.isolated ? isolated_->Run(fn, call.args, ex, call.writable)
                           : LocalContext::Run(&ex, fn, call.args);
  }
  const int64_t end = SteadyNanos();
  uint64_t ns = ElapsedNs(start, end);
  unstamp();
  if (inlined) {
    if (absl::Nanoseconds(ns) > options_.inline_overrun) {
      MarkOverran(fn, static_cast<int64_t>(ns), options_.overruns_to_pool);
    } else if (fn.stats().overruns.load(std::memory_order_relaxed) != 0) {
      fn.stats().overruns.store(0, std::memory_order_relaxed);
    }
  }
  Complete(call, ex, std::move(result), ns, static_cast<uint64_t>(end));
}

void RequestHandler::HandOff(const Call& call, std::unique_ptr<IsolatedPool::InFlight> in_flight,
                             const Execution& so_far, int64_t start) {
  WorkerPool::Job job;
  job.deadline = call.deadline;
  auto held = std::make_shared<std::unique_ptr<IsolatedPool::InFlight>>(std::move(in_flight));
  job.run = [this, held, fn = call.fn, args = std::string(call.args), deadline = call.deadline,
             responder = call.responder, sink = call.sink, writable = call.writable,
             from_peer = call.from_peer, apply = call.apply, stale_read = call.stale_read,
             counts = so_far.counts, parked = so_far.parked, start] {
    Call call{fn,       args,      deadline, responder, sink, /*isolated=*/true,
              writable, from_peer, apply,    stale_read};
    Host host(this, call);
    Execution ex;
    Prepare(ex, call, &host, /*on_worker=*/true);
    ex.counts = counts;
    ex.parked = parked;
    absl::StatusOr<std::string> result = isolated_->Finish(std::move(*held), ex);
    const int64_t end = SteadyNanos();
    Complete(call, ex, std::move(result), ElapsedNs(start, end),
             static_cast<uint64_t>(end));
  };
  job.expired = [this, responder = call.responder] {  // (its worker is ended with `held`)
    counters_.Add(Stat::kExecutesExpired, 1);
    responder->Respond(absl::DeadlineExceededError("deadline passed before the function ended"));
  };
  if (!workers_->Submit(std::move(job))) {
    counters_.Add(Stat::kExecutesRejected, 1);
    call.responder->Respond(absl::ResourceExhaustedError("worker queue is full"));
  }
}

void RequestHandler::Complete(const Call& call, Execution& ex, absl::StatusOr<std::string> result,
                              uint64_t ns, uint64_t end_ns) {
  const BoundFunction& fn = call.fn;
  fn.stats().Record(ns);
  counters_.Add(Stat::kExecuteNs, ns);
  counters_.AddActive(ex.counts);
  if (ex.parked != nullptr) {
    counters_.Add(Stat::kParkedTotal, 1);
    parking_.FunctionReturned(ex.parked, result.status());
    return;
  }
  if (ex.rescheduled && IsRescheduled(result.status()) && workers_ != nullptr) {
    // It backed off on an I/O thread: run it again, from the start, where it may sleep.
    counters_.Add(Stat::kExecutesRescheduled, 1);
    // (A write of a replicated slot waits for its replicas on a pool of such writes.)
    Start(call, /*may_inline=*/false, /*replicating=*/ex.replicates);
    return;
  }
  if (ex.ticket.has_value()) {
    // The replicas apply it in this slot's order before the client hears of it.
    counters_.Add(Stat::kReplicatedWrites, 1);
    absl::Status forwarded =
        options_.replication->Forward(*ex.ticket, fn.name(), call.args, call.deadline);
    if (!forwarded.ok()) {
      counters_.Add(Stat::kReplicationFailures, 1);
      result = forwarded;
    }
    end_ns = NowNs();
  }
  if (call.apply.has_value()) {
    counters_.Add(Stat::kReplicaApplied, 1);
    options_.replication->Applied(*call.apply);
  }
  if (result.ok() && syncer_.always()) {
    if (absl::Status synced = syncer_.RanCode(); !synced.ok()) result = synced;
    end_ns = NowNs();  // (the sync is part of the answer's time)
  }
  call.responder->RespondAt(std::move(result), end_ns);
}

}  // namespace ardma
