#include "core/server/request_handler.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/server/op_support.h"
#include "core/status_macros.h"

namespace ardma {

using ops::LatencyRecorder;
using ops::NowNs;
using wire::FrameHeader;
using wire::Op;

const RequestHandler::OpRow& RequestHandler::Row(Op op) {
  static const std::array<OpRow, 256> table = [] {
    using security::kAdmin, security::kExec, security::kLoad, security::kRead, security::kWrite;
    std::array<OpRow, 256> t{};
    auto row = [&t](Op op) -> OpRow& { return t[static_cast<uint8_t>(op)]; };
    row(Op::kPing) = {&RequestHandler::Ping};
    row(Op::kRead) = {&RequestHandler::Read, kRead};
    row(Op::kWrite) = {&RequestHandler::Write, kWrite};
    row(Op::kCas) = {&RequestHandler::Cas, kWrite};
    row(Op::kFetchAdd) = {&RequestHandler::FetchAdd, kWrite};
    row(Op::kHasCode) = {&RequestHandler::HasCode, kExec | kLoad};
    row(Op::kLoad) = {&RequestHandler::Load, kLoad, /*answers_itself=*/true};
    row(Op::kExecute) = {&RequestHandler::Execute, kExec, /*answers_itself=*/true};
    row(Op::kStats) = {&RequestHandler::StatsOp};  // details only with admin
    // REGISTER maps the client's own memory for others (docs/SECURITY.md).
    row(Op::kRegister) = {&RequestHandler::Regions, kWrite};
    row(Op::kDeregister) = {&RequestHandler::Regions, kWrite};
    row(Op::kRegionInfo) = {&RequestHandler::Regions, kRead};
    // The session gets this connection's grant (ucx_server.cc).
    row(Op::kUcxConnect) = {&RequestHandler::UcxConnect};
    row(Op::kHello) = {&RequestHandler::RefuseHello};
    (void)kAdmin;
    return t;
  }();
  return table[static_cast<uint8_t>(op)];
}

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
    if (options_.replication != nullptr) {
      apply_workers_ = std::make_unique<WorkerPool>(1, options_.worker_queue);
      replicating_workers_ = std::make_unique<WorkerPool>(
          options_.replicating_workers > 0 ? options_.replicating_workers : options_.workers,
          options_.worker_queue);
    }
  }
}

RequestHandler::~RequestHandler() { Stop(); }

void RequestHandler::Stop() {
  cancelled_.store(true);
  if (workers_ != nullptr) workers_->Stop();
  if (apply_workers_ != nullptr) apply_workers_->Stop();
  if (replicating_workers_ != nullptr) replicating_workers_->Stop();
  syncer_.Stop();
}

void RequestHandler::Reply(const std::shared_ptr<ResponseSink>& sink, std::string frame) {
  counters_.Add(Stat::kBytesOut, frame.size());
  sink->Send(std::move(frame));
}

void RequestHandler::ReplyError(const std::shared_ptr<ResponseSink>& sink,
                                const FrameHeader& header, const absl::Status& status) {
  counters_.Add(Stat::kErrors, 1);
  ARDMA_LOG(kDebug, "%s #%u of client %016x failed: %s", wire::OpName(header.op), header.request_id,
            header.client_id, status.ToString());
  Reply(sink, wire::EncodeErrorResponse(header, status));
}

void RequestHandler::ReplyResult(const std::shared_ptr<ResponseSink>& sink,
                                 const FrameHeader& header,
                                 const absl::StatusOr<std::string>& result) {
  if (!sink->Open()) return;
  if (result.ok()) {
    Reply(sink, ops::OkFrame(header, *result));
  } else {
    ReplyError(sink, header, result.status());
  }
}

bool RequestHandler::AdmitOnce(const FrameHeader& header,
                               const std::shared_ptr<ResponseSink>& sink) {
  // A retry is answered through a responder that only sends; the window keeps the result.
  auto replay = [&]() -> std::shared_ptr<Responder> {
    return std::make_shared<ops::SinkResponder>(
        sink, [this, sink, header](auto result) { ReplyResult(sink, header, result); });
  };
  return dedup_.Admit(header.client_id, header.request_id, replay) == DedupWindow::Admission::kRun;
}

void RequestHandler::Handle(const FrameHeader& header, std::string_view payload,
                            const std::shared_ptr<ResponseSink>& sink) {
  counters_.Add(Stat::kBytesIn, wire::kHeaderSize + payload.size());
  uint8_t op = static_cast<uint8_t>(header.op);
  if (!wire::IsKnownOp(op)) {
    ReplyError(sink, header, absl::InvalidArgumentError(absl::StrCat("unknown op ", op)));
    return;
  }
  counters_.AddRequest(op);
  const uint64_t start_ns = NowNs();
  LatencyRecorder recorder(&counters_.Latency(op), start_ns);
  if (header.is_response()) {
    ReplyError(sink, header, absl::InvalidArgumentError("server received a response frame"));
    return;
  }
  if (header.op == Op::kAuth) {  // the one op before a grant
    HandleAuth(header, payload, sink);
    return;
  }
  const security::Grant* grant = sink->auth().Granted();
  if (grant == nullptr) {
    counters_.Add(Stat::kAuthRefused, 1);
    counters_.Add(Stat::kErrors, 1);
    counters_.Add(Stat::kBytesOut, wire::kHeaderSize);
    sink->SendAndClose(wire::EncodeErrorResponse(
        header, absl::UnauthenticatedError(
                    "this server requires authentication before any other request (give the "
                    "client --auth-file FILE or set ARDMA_AUTH_FILE)")));
    return;
  }
  const OpRow& row = Row(header.op);
  if (row.run == nullptr) {
    ReplyError(
        sink, header,
        absl::InvalidArgumentError(absl::StrCat(wire::OpName(header.op), " is not a request")));
    return;
  }
  if (absl::Status allowed = Allowed(header.op, row, *grant); !allowed.ok()) {
    counters_.Add(Stat::kPermissionDenied, 1);
    ReplyError(sink, header, allowed);
    return;
  }
  const Request request{header, payload, sink, *grant, start_ns};
  if (row.answers_itself) {
    recorder.Dismiss();
    (this->*row.run)(request, nullptr).IgnoreError();
    return;
  }
  std::string out;
  size_t start = wire::BeginFrame(&out);
  if (absl::Status status = (this->*row.run)(request, &out); !status.ok()) {
    ReplyError(sink, header, status);
    return;
  }
  if (request.answered) {  // a retried WRITE, answered from the de-duplication window
    recorder.Dismiss();
    return;
  }
  FrameHeader h = header;
  h.flags = wire::kFlagResponse;
  h.status = 0;
  wire::FinishFrame(h, start, &out);
  Reply(sink, std::move(out));
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
      close_hooks_[sink.get()][std::string(key)] = {std::string(function), std::string(args),
                                                    MayWrite(sink.get())};
    }
  }
  if (run_now) RunCloseHook(std::string(function), std::string(args), MayWrite(sink.get()));
  return absl::OkStatus();
}

void RequestHandler::ConnectionClosed(const ResponseSink* sink) {
  if (connection_closed_) connection_closed_(sink);
  registrar_.OwnerGone(sink);
  // Requests it parked are forgotten now (their deadlines may be far away).
  if (parking_.size() > 0) parking_.Expire(absl::Now());
  if (owners_ != nullptr) owners_->Leave(sink->auth().owner_token);
  absl::flat_hash_map<std::string, CloseHook> hooks;
  {
    absl::MutexLock lock(&hooks_mu_);
    auto it = close_hooks_.find(sink);
    if (it == close_hooks_.end()) return;
    hooks = std::move(it->second);
    close_hooks_.erase(it);
  }
  for (auto& [key, hook] : hooks) RunCloseHook(hook.function, hook.args, hook.writable);
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

void RequestHandler::RunCloseHook(const std::string& function, const std::string& args,
                                  bool writable) {
  if (cancelled_.load()) return;  // shutting down: no worker will run it
  counters_.Add(Stat::kCloseHooksRun, 1);
  auto responder = std::make_shared<LogResponder>(function);
  absl::StatusOr<BoundFunction> fn = registry_->Resolve(function);
  if (!fn.ok()) {
    responder->Respond(fn.status());
    return;
  }
  const std::shared_ptr<ResponseSink> no_sink;
  std::shared_ptr<Responder> as_responder = responder;
  Start({.fn = *fn,
         .args = args,
         .deadline = absl::Now() + options_.default_deadline,
         .responder = as_responder,
         .sink = no_sink,
         .isolated = Isolated(*fn, nullptr),
         .writable = writable},
        /*may_inline=*/false);
}

void RequestHandler::ExpireParked() { parking_.Expire(absl::Now()); }

absl::Time RequestHandler::NextParkedEvent() const { return parking_.NextEvent(); }

void RequestHandler::SetParkedListener(std::function<void(absl::Time)> listener) {
  parking_.SetEventListener(std::move(listener));
}

}  // namespace ardma
