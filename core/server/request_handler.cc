#include "core/server/request_handler.h"

#include <chrono>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/active/local_context.h"
#include "core/log.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"

namespace ardma {

using wire::FrameHeader;
using wire::Op;

namespace {

std::string OkFrame(const FrameHeader& request, std::string_view payload) {
  std::string out;
  out.reserve(wire::kHeaderSize + payload.size());
  size_t start = wire::BeginFrame(&out);
  out.append(payload.data(), payload.size());
  FrameHeader h = request;
  h.flags = wire::kFlagResponse;
  h.status = 0;
  wire::FinishFrame(h, start, &out);
  return out;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Records a request's latency when the handler is done with it, unless dismissed (a request
// answered later records its own).
class LatencyRecorder {
 public:
  LatencyRecorder(LatencyHistogram* histogram, uint64_t start_ns)
      : histogram_(histogram), start_ns_(start_ns) {}
  ~LatencyRecorder() {
    if (histogram_ != nullptr) histogram_->Record(NowNs() - start_ns_);
  }
  void Dismiss() { histogram_ = nullptr; }

 private:
  LatencyHistogram* histogram_;
  const uint64_t start_ns_;
};

}  // namespace

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
    if (deduplicated_) handler_->dedup_.Finish(header_.client_id, header_.request_id, result);
    handler_->ReplyResult(sink_, header_, result);
    handler_->counters_.latency[static_cast<uint8_t>(wire::Op::kExecute)].Record(NowNs() -
                                                                                 start_ns_);
  }
  bool Alive() const override { return sink_->Open(); }

 private:
  RequestHandler* const handler_;
  const std::shared_ptr<ResponseSink> sink_;
  const FrameHeader header_;
  const bool deduplicated_;
  const uint64_t start_ns_;
};

// Answers a retry (or the original, if it was attached) with whatever the window holds.
class SinkResponder : public Responder {
 public:
  using ReplyFn = std::function<void(absl::StatusOr<std::string>)>;
  SinkResponder(std::shared_ptr<ResponseSink> sink, ReplyFn reply)
      : sink_(std::move(sink)), reply_(std::move(reply)) {}
  void Respond(absl::StatusOr<std::string> result) override { reply_(std::move(result)); }
  bool Alive() const override { return sink_->Open(); }

 private:
  std::shared_ptr<ResponseSink> sink_;
  ReplyFn reply_;
};

RequestHandler::RequestHandler(const HandlerOptions& options, RegionTable* regions,
                               CodeRegistry* registry)
    : options_(options),
      regions_(regions),
      registry_(registry),
      dedup_(options.dedup),
      registrar_(options.registration, regions),
      syncer_(options.sync, options.sync_interval, regions, &counters_) {
  if (options_.workers > 0) {
    workers_ = std::make_unique<WorkerPool>(options_.workers, options_.worker_queue);
  }
}

RequestHandler::~RequestHandler() { Stop(); }

void RequestHandler::Stop() {
  cancelled_.store(true);
  if (workers_ != nullptr) workers_->Stop();
  syncer_.Stop();
}

void RequestHandler::Reply(const std::shared_ptr<ResponseSink>& sink, std::string frame) {
  ServerCounters::Add(counters_.bytes_out, frame.size());
  sink->Send(std::move(frame));
}

void RequestHandler::ReplyError(const std::shared_ptr<ResponseSink>& sink,
                                const FrameHeader& header, const absl::Status& status) {
  ServerCounters::Add(counters_.errors, 1);
  ARDMA_LOG(kDebug, "%s #%u of client %016x failed: %s", wire::OpName(header.op), header.request_id,
            header.client_id, status.ToString());
  Reply(sink, wire::EncodeErrorResponse(header, status));
}

void RequestHandler::ReplyResult(const std::shared_ptr<ResponseSink>& sink,
                                 const FrameHeader& header,
                                 const absl::StatusOr<std::string>& result) {
  if (!sink->Open()) return;
  if (result.ok()) {
    Reply(sink, OkFrame(header, *result));
  } else {
    ReplyError(sink, header, result.status());
  }
}

void RequestHandler::Handle(const FrameHeader& header, std::string_view payload,
                            const std::shared_ptr<ResponseSink>& sink) {
  ServerCounters::Add(counters_.bytes_in, wire::kHeaderSize + payload.size());
  uint8_t op = static_cast<uint8_t>(header.op);
  if (!wire::IsKnownOp(op)) {
    ReplyError(sink, header, absl::InvalidArgumentError(absl::StrCat("unknown op ", op)));
    return;
  }
  ServerCounters::Add(counters_.requests[op], 1);
  const uint64_t start_ns = NowNs();
  LatencyRecorder recorder(&counters_.latency[op], start_ns);
  if (header.is_response()) {
    ReplyError(sink, header, absl::InvalidArgumentError("server received a response frame"));
    return;
  }

  if (header.op == Op::kAuth) {
    HandleAuth(header, payload, sink);
    return;
  }
  const security::Grant* grant = sink->auth().Granted();
  if (grant == nullptr) {
    ServerCounters::Add(counters_.auth_refused, 1);
    ServerCounters::Add(counters_.errors, 1);
    ServerCounters::Add(counters_.bytes_out, wire::kHeaderSize);
    sink->SendAndClose(wire::EncodeErrorResponse(
        header, absl::UnauthenticatedError(
                    "this server requires authentication before any other request (give the "
                    "client --auth-file FILE or set ARDMA_AUTH_FILE)")));
    return;
  }
  if (absl::Status allowed = Allowed(header.op, *grant); !allowed.ok()) {
    ServerCounters::Add(counters_.permission_denied, 1);
    ReplyError(sink, header, allowed);
    return;
  }

  std::string out;
  size_t start = wire::BeginFrame(&out);
  absl::Status status;
  switch (header.op) {
    case Op::kPing:
      out.append(payload.data(), payload.size());
      break;
    case Op::kRead:
      status = HandleRead(payload, *grant, &out);
      break;
    case Op::kWrite:
      if (header.client_id != 0) {
        // A retried WRITE (same client and request id, after a broken connection) must not
        // apply again: it could overwrite what was written since. De-duplicated as EXECUTE is.
        auto replay = std::make_shared<SinkResponder>(
            sink, [this, sink, header](auto result) { ReplyResult(sink, header, result); });
        if (dedup_.Admit(header.client_id, header.request_id, replay) !=
            DedupWindow::Admission::kRun) {
          recorder.Dismiss();
          return;
        }
        status = HandleWrite(payload, *grant);
        dedup_.Finish(header.client_id, header.request_id,
                      status.ok() ? absl::StatusOr<std::string>(std::string()) : status);
        break;
      }
      status = HandleWrite(payload, *grant);
      break;
    case Op::kCas:
      status = HandleCas(payload, *grant, &out);
      break;
    case Op::kFetchAdd:
      status = HandleFetchAdd(payload, *grant, &out);
      break;
    case Op::kHasCode: {
      absl::StatusOr<wire::CodeHash> hash = wire::DecodeHash(payload);
      status = hash.status();
      if (hash.ok()) wire::EncodeHasCodeResponse(registry_->Has(*hash), &out);
      break;
    }
    case Op::kStats:
      if (!payload.empty()) {
        status = absl::InvalidArgumentError("STATS takes no payload");
      } else {
        wire::EncodeStatsResponse(grant->Has(security::kAdmin) ? Stats() : StatsSummary(), &out);
      }
      break;
    case Op::kLoad:
      recorder.Dismiss();
      HandleLoad(header, payload, sink, start_ns);
      return;
    case Op::kExecute:
      recorder.Dismiss();
      HandleExecute(header, payload, sink, start_ns);
      return;
    case Op::kHello:
    case Op::kAuth:  // handled above
      status = absl::InvalidArgumentError("HELLO is sent by the server only");
      break;
    case Op::kRegister:
    case Op::kDeregister:
    case Op::kRegionInfo:
      status = HandleRegions(header, payload, sink, *grant, &out);
      break;
    case Op::kUcxConnect: {
      if (!ucx_connect_) {
        status = absl::FailedPreconditionError(
            "this server does not offer UCX (started with --ucx off, or UCX failed to start)");
        break;
      }
      absl::StatusOr<std::string> hello = ucx_connect_(payload, sink);
      status = hello.status();
      if (hello.ok()) out.append(*hello);
      break;
    }
  }
  if (!status.ok()) {
    ReplyError(sink, header, status);
    return;
  }
  FrameHeader h = header;
  h.flags = wire::kFlagResponse;
  h.status = 0;
  wire::FinishFrame(h, start, &out);
  Reply(sink, std::move(out));
}

absl::Status RequestHandler::HandleRead(std::string_view payload, const security::Grant& grant,
                                        std::string* out) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<wire::ReadEntry> entries,
                         wire::DecodeReadRequest(payload, options_.limits));
  // Validate everything before sizing the response; hold each region until it is copied.
  absl::InlinedVector<RegionRef, 4> refs;
  refs.reserve(entries.size());
  size_t total = 0;
  for (const wire::ReadEntry& e : entries) {
    ARDMA_RETURN_IF_ERROR(MayAccess(grant, e.region, /*write=*/false));
    ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(e.region));
    ARDMA_RETURN_IF_ERROR(region->CheckRange(e.addr, e.len));
    refs.push_back(std::move(region));
    total += e.len;
  }
  size_t pos = out->size();
  out->resize(pos + total);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(out->data() + pos, refs[i]->data() + entries[i].addr, entries[i].len);
    pos += entries[i].len;
  }
  return absl::OkStatus();
}

absl::Status RequestHandler::HandleWrite(std::string_view payload, const security::Grant& grant) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<wire::WriteEntry> entries,
                         wire::DecodeWriteRequest(payload, options_.limits));
  absl::InlinedVector<RegionRef, 4> refs;
  refs.reserve(entries.size());
  for (const wire::WriteEntry& e : entries) {
    ARDMA_RETURN_IF_ERROR(MayAccess(grant, e.region, /*write=*/true));
    ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(e.region));
    ARDMA_RETURN_IF_ERROR(region->CheckWritable(e.addr, e.data.size()));
    refs.push_back(std::move(region));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(refs[i]->data() + entries[i].addr, entries[i].data.data(), entries[i].data.size());
  }
  if (syncer_.always()) {
    for (size_t i = 0; i < entries.size(); ++i) {
      ARDMA_RETURN_IF_ERROR(syncer_.Wrote(*refs[i], entries[i].addr, entries[i].data.size()));
    }
  }
  return absl::OkStatus();
}

absl::Status RequestHandler::HandleCas(std::string_view payload, const security::Grant& grant,
                                       std::string* out) {
  ARDMA_ASSIGN_OR_RETURN(wire::CasRequest req, wire::DecodeCasRequest(payload));
  ARDMA_RETURN_IF_ERROR(MayAccess(grant, req.region, /*write=*/true));
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(req.region));
  ARDMA_ASSIGN_OR_RETURN(CasResult r, region->CompareAndSwap(req.addr, req.expected, req.desired));
  if (r.swapped) ARDMA_RETURN_IF_ERROR(syncer_.Wrote(*region, req.addr, 8));
  wire::EncodeU64Response(r.observed, out);
  return absl::OkStatus();
}

absl::Status RequestHandler::HandleFetchAdd(std::string_view payload, const security::Grant& grant,
                                            std::string* out) {
  ARDMA_ASSIGN_OR_RETURN(wire::FetchAddRequest req, wire::DecodeFetchAddRequest(payload));
  ARDMA_RETURN_IF_ERROR(MayAccess(grant, req.region, /*write=*/true));
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(req.region));
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, region->FetchAdd(req.addr, req.delta));
  ARDMA_RETURN_IF_ERROR(syncer_.Wrote(*region, req.addr, 8));
  wire::EncodeU64Response(old, out);
  return absl::OkStatus();
}

absl::Status RequestHandler::HandleRegions(const FrameHeader& header, std::string_view payload,
                                           const std::shared_ptr<ResponseSink>& sink,
                                           const security::Grant& grant, std::string* out) {
  if (header.op == Op::kRegister) {
    ARDMA_ASSIGN_OR_RETURN(wire::RegisterRequest req, wire::DecodeRegisterRequest(payload));
    ARDMA_ASSIGN_OR_RETURN(wire::UcxRegionKey key,
                           registrar_.Register(req, sink.get(), sink->auth().peer_pid, grant));
    if (!sink->Open()) {  // closed meanwhile: its close has run, or will not see this region
      registrar_.OwnerGone(sink.get());
      return absl::UnavailableError("the connection closed");
    }
    wire::EncodeRegionKey(key, out);
    return absl::OkStatus();
  }
  ARDMA_ASSIGN_OR_RETURN(RegionId id, wire::DecodeRegionId(payload));
  if (header.op == Op::kDeregister) return registrar_.Deregister(id, sink.get());
  if (!grant.MayRead(id)) {
    return absl::PermissionDeniedError(absl::StrCat("this connection may not read region ", id));
  }
  ARDMA_ASSIGN_OR_RETURN(wire::UcxRegionKey key, registrar_.Info(id, grant));
  wire::EncodeRegionKey(key, out);
  return absl::OkStatus();
}

void RequestHandler::HandleLoad(const FrameHeader& header, std::string_view payload,
                                const std::shared_ptr<ResponseSink>& sink, uint64_t start_ns) {
  LatencyRecorder recorder(&counters_.latency[static_cast<uint8_t>(Op::kLoad)], start_ns);
  absl::StatusOr<wire::LoadRequest> req = wire::DecodeLoadRequest(payload);
  if (!req.ok()) {
    ReplyError(sink, header, req.status());
    return;
  }
  // Who loads decides which names the code may take over (docs/SECURITY.md).
  LoadAuthority by;
  if (const security::Grant* grant = sink->auth().Granted(); grant != nullptr) {
    by.owner = sink->auth().name;
    by.may_repoint = grant->Has(security::kAdmin);
  }
  auto load = [this, header, sink, by, start_ns](const wire::LoadRequest& r) {
    LatencyRecorder loaded(&counters_.latency[static_cast<uint8_t>(Op::kLoad)], start_ns);
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
    Reply(sink, OkFrame(header, out));
  };
  // Known code, or no pool: answer here. New code is loaded on a worker (dlopen can be slow).
  recorder.Dismiss();  // `load` records it, here or on a worker
  if (workers_ == nullptr || registry_->Has(Sha256(req->code))) {
    load(*req);
    return;
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
}

void RequestHandler::HandleExecute(const FrameHeader& header, std::string_view payload,
                                   const std::shared_ptr<ResponseSink>& sink, uint64_t start_ns) {
  absl::StatusOr<wire::ExecuteRequest> req = wire::DecodeExecuteRequest(payload);
  if (!req.ok()) {
    ReplyError(sink, header, req.status());
    return;
  }
  bool deduplicate = header.client_id != 0;
  auto responder = std::make_shared<ExecuteResponder>(this, sink, header, deduplicate, start_ns);
  if (deduplicate) {
    // A retry is answered through a responder that only sends; the window keeps the result.
    auto replay = std::make_shared<SinkResponder>(
        sink, [this, sink, header](auto result) { ReplyResult(sink, header, result); });
    if (dedup_.Admit(header.client_id, header.request_id, replay) != DedupWindow::Admission::kRun) {
      return;
    }
  }
  absl::StatusOr<BoundFunction> fn = req->by_hash ? registry_->Resolve(req->hash, req->function)
                                                  : registry_->Resolve(req->function);
  if (!fn.ok()) {
    responder->Respond(fn.status());
    return;
  }
  absl::Time now = absl::Now();
  absl::Time deadline = req->timeout_us == 0
                            ? now + options_.default_deadline
                            : now + absl::Microseconds(static_cast<int64_t>(
                                        std::min<uint64_t>(req->timeout_us, INT64_MAX / 2)));
  // (An isolated call waits for a process: never on an I/O thread if there are workers.)
  if (workers_ == nullptr || (!Isolated(*fn, sink.get()) && MayRunInline(*fn))) {
    ServerCounters::Add(counters_.executes_inline, 1);
    RunExecute(*fn, req->args, deadline, /*on_worker=*/workers_ == nullptr, responder, sink);
    return;
  }
  ServerCounters::Add(counters_.executes_pooled, 1);
  SubmitExecute(*fn, req->args, deadline, responder, sink);
}

namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

thread_local std::atomic<int64_t>* io_busy_stamp = nullptr;

void MarkOverran(const BoundFunction& fn, int64_t ns) {
  if (!fn.stats().never_inline.exchange(true, std::memory_order_relaxed)) {
    ARDMA_LOG(kWarning, "%s ran %s on an I/O thread; from now on it runs on the worker pool",
              std::string(fn.name()), absl::FormatDuration(absl::Nanoseconds(ns)));
  }
}

}  // namespace

void RequestHandler::SetIoBusyStamp(std::atomic<int64_t>* stamp) { io_busy_stamp = stamp; }

bool RequestHandler::IoThreadStuck(const std::atomic<int64_t>& stamp) const {
  int64_t since = stamp.load(std::memory_order_relaxed);
  return since != 0 && absl::Nanoseconds(SteadyNanos() - since) > options_.inline_overrun;
}

// Only a function known to be short: seen before, short on average and last time, never overran
// on an I/O thread, and not running long there right now.
bool RequestHandler::Isolated(const BoundFunction& fn, const ResponseSink* sink) const {
  if (isolated_ == nullptr || !isolated_->Isolates(fn)) return false;
  if (isolate_all_) return true;
  // Only admins' code runs in the server; a close hook's (no connection any more) does not.
  const security::Grant* grant = sink != nullptr ? sink->auth().Granted() : nullptr;
  return grant == nullptr || !grant->Has(security::kAdmin);
}

bool RequestHandler::MayRunInline(const BoundFunction& fn) const {
  FunctionStats& stats = fn.stats();
  if (stats.never_inline.load(std::memory_order_relaxed)) return false;
  int64_t since = stats.inline_since_ns.load(std::memory_order_relaxed);
  if (since != 0) {
    int64_t running = SteadyNanos() - since;
    if (absl::Nanoseconds(running) > options_.inline_overrun) {
      MarkOverran(fn, running);
      return false;
    }
  }
  auto short_run = [this](const std::atomic<uint64_t>& ns) {
    return absl::Nanoseconds(ns.load(std::memory_order_relaxed)) < options_.inline_threshold;
  };
  return stats.calls.load(std::memory_order_relaxed) > 0 && short_run(stats.average_ns) &&
         short_run(stats.last_ns);
}

void RequestHandler::SubmitExecute(const BoundFunction& fn, std::string_view args,
                                   absl::Time deadline, const std::shared_ptr<Responder>& responder,
                                   const std::shared_ptr<ResponseSink>& sink) {
  if (workers_ == nullptr) {  // every run is inline
    RunExecute(fn, args, deadline, /*on_worker=*/true, responder, sink);
    return;
  }
  WorkerPool::Job job;
  job.deadline = deadline;
  job.run = [this, fn, args = std::string(args), deadline, responder, sink] {
    RunExecute(fn, args, deadline, /*on_worker=*/true, responder, sink);
  };
  job.expired = [this, responder] {
    ServerCounters::Add(counters_.executes_expired, 1);
    responder->Respond(absl::DeadlineExceededError("deadline passed before the function started"));
  };
  if (!workers_->Submit(std::move(job))) {
    ServerCounters::Add(counters_.executes_rejected, 1);
    responder->Respond(absl::ResourceExhaustedError("worker queue is full"));
  }
}

// RequestHost for one run of an EXECUTE (or of a close hook, which has no connection).
class RequestHandler::Host : public RequestHost {
 public:
  Host(RequestHandler* handler, const BoundFunction& fn, absl::Time deadline,
       const std::shared_ptr<Responder>& responder, const std::shared_ptr<ResponseSink>& sink)
      : handler_(handler), fn_(fn), deadline_(deadline), responder_(responder), sink_(sink) {}

  ParkingLot::ResumeFn MakeResume(std::string args) override {
    return [handler = handler_, fn = fn_, args = std::move(args), deadline = deadline_,
            responder = responder_, sink = sink_] {
      ServerCounters::Add(handler->counters_.executes_resumed, 1);
      handler->SubmitExecute(fn, args, deadline, responder, sink);
    };
  }
  absl::Status OnClose(std::string_view key, std::string_view function,
                       std::string_view args) override {
    if (sink_ == nullptr) return absl::FailedPreconditionError("a close hook has no connection");
    return handler_->SetCloseHook(sink_, key, function, args);
  }

 private:
  RequestHandler* const handler_;
  const BoundFunction& fn_;
  const absl::Time deadline_;
  const std::shared_ptr<Responder>& responder_;
  const std::shared_ptr<ResponseSink>& sink_;
};

void RequestHandler::RunExecute(const BoundFunction& fn, std::string_view args, absl::Time deadline,
                                bool on_worker, const std::shared_ptr<Responder>& responder,
                                const std::shared_ptr<ResponseSink>& sink) {
  Host host(this, fn, deadline, responder, sink);
  Execution ex;
  ex.regions = regions_;
  ex.registry = registry_;
  ex.parking = &parking_;
  ex.responder = responder;
  ex.host = &host;
  ex.deadline = deadline;
  ex.cancelled = &cancelled_;
  if (owners_ != nullptr) ex.owner = owners_->server();
  ex.may_block = on_worker;
  ex.access_cost = options_.access_cost;
  // On an I/O thread (and not a server without workers, where every run is): stamped, so a run
  // that does not end is seen by the next caller and by the acceptor.
  bool io_thread = !on_worker;
  int64_t start = SteadyNanos();
  bool stamped = false;
  if (io_thread) {
    int64_t idle = 0;
    stamped =
        fn.stats().inline_since_ns.compare_exchange_strong(idle, start, std::memory_order_relaxed);
    if (io_busy_stamp != nullptr) io_busy_stamp->store(start, std::memory_order_relaxed);
  }
  absl::StatusOr<std::string> result =
      Isolated(fn, sink.get()) ? isolated_->Run(fn, args, ex) : LocalContext::Run(&ex, fn, args);
  uint64_t ns = static_cast<uint64_t>(SteadyNanos() - start);
  if (io_thread) {
    if (stamped) fn.stats().inline_since_ns.store(0, std::memory_order_relaxed);
    if (io_busy_stamp != nullptr) io_busy_stamp->store(0, std::memory_order_relaxed);
    if (absl::Nanoseconds(ns) > options_.inline_overrun) MarkOverran(fn, ns);
  }
  fn.stats().Record(ns);
  ServerCounters::Add(counters_.execute_ns, ns);
  counters_.AddActive(ex.counts);
  if (ex.parked != nullptr) {
    ServerCounters::Add(counters_.parked_total, 1);
    parking_.FunctionReturned(ex.parked, result.status());
    return;
  }
  if (ex.rescheduled && IsRescheduled(result.status()) && workers_ != nullptr) {
    // It backed off on an I/O thread: run it again, from the start, where it may sleep.
    ServerCounters::Add(counters_.executes_rescheduled, 1);
    SubmitExecute(fn, args, deadline, responder, sink);
    return;
  }
  if (result.ok() && syncer_.always()) {
    if (absl::Status synced = syncer_.RanCode(); !synced.ok()) result = synced;
  }
  responder->Respond(std::move(result));
}

absl::Status RequestHandler::SetCloseHook(const std::shared_ptr<ResponseSink>& sink,
                                          std::string_view key, std::string_view function,
                                          std::string_view args) {
  bool run_now = false;
  {
    absl::MutexLock lock(&hooks_mu_);
    if (!sink->Open()) {
      // Closed already (ConnectionClosed has run or is running): run it ourselves.
      run_now = !function.empty();
    } else if (function.empty()) {
      auto it = close_hooks_.find(sink.get());
      if (it != close_hooks_.end()) {
        it->second.erase(ToAbsl(key));
        if (it->second.empty()) close_hooks_.erase(it);
      }
    } else {
      close_hooks_[sink.get()][std::string(key)] = {std::string(function), std::string(args)};
    }
  }
  if (run_now) RunCloseHook(std::string(function), std::string(args));
  return absl::OkStatus();
}

void RequestHandler::ConnectionClosed(const ResponseSink* sink) {
  registrar_.OwnerGone(sink);
  if (owners_ != nullptr) owners_->Leave(sink->auth().owner_token);
  absl::flat_hash_map<std::string, CloseHook> hooks;
  {
    absl::MutexLock lock(&hooks_mu_);
    auto it = close_hooks_.find(sink);
    if (it == close_hooks_.end()) return;
    hooks = std::move(it->second);
    close_hooks_.erase(it);
  }
  for (auto& [key, hook] : hooks) RunCloseHook(hook.function, hook.args);
}

namespace {

// Close hooks answer nobody: errors are logged.
class LogResponder : public Responder {
 public:
  explicit LogResponder(std::string function) : function_(std::move(function)) {}
  void Respond(absl::StatusOr<std::string> result) override {
    if (!result.ok()) {
      ARDMA_LOG(kWarning, "close hook %s failed: %s", function_, result.status().ToString());
    }
  }
  bool Alive() const override { return true; }

 private:
  const std::string function_;
};

}  // namespace

void RequestHandler::RunCloseHook(const std::string& function, const std::string& args) {
  if (cancelled_.load()) return;  // shutting down: no worker will run it
  ServerCounters::Add(counters_.close_hooks_run, 1);
  auto responder = std::make_shared<LogResponder>(function);
  absl::StatusOr<BoundFunction> fn = registry_->Resolve(function);
  if (!fn.ok()) {
    responder->Respond(fn.status());
    return;
  }
  SubmitExecute(*fn, args, absl::Now() + options_.default_deadline, responder, nullptr);
}

void RequestHandler::ExpireParked() { parking_.Expire(absl::Now()); }

}  // namespace ardma
