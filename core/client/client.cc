#include "core/client/client.h"

#include <cstring>
#include <random>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/client/ucx_connection.h"
#include "core/clock.h"
#include "core/status_macros.h"

namespace ardma {

using wire::Op;

namespace {

// A TCP or Unix-socket connection, or UCX bootstrapped over one.
absl::StatusOr<std::shared_ptr<Transport>> OpenTransport(std::string_view address,
                                                         const ClientOptions& options,
                                                         ClientCounters* counters) {
  const security::Credentials* credentials =
      options.credentials.has_value() ? &*options.credentials : nullptr;
  if (address.substr(0, kUcxPrefix.size()) == kUcxPrefix) {
    address.remove_prefix(kUcxPrefix.size());
    if (address.substr(0, kTlsPrefix.size()) == kTlsPrefix) {
      return absl::InvalidArgumentError(
          "UCX sessions are not encrypted, so ucx:// cannot take tls:// (docs/SECURITY.md)");
    }
    ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<UcxConnection> ucx,
                           UcxConnection::Open(address, options.connect_timeout, options.limits,
                                               counters, credentials));
    return std::shared_ptr<Transport>(std::move(ucx));
  }
  ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<Connection> tcp,
                         Connection::Open(address, options.connect_timeout, options.limits,
                                          counters, credentials, options.tls));
  return std::shared_ptr<Transport>(std::move(tcp));
}

// Waits until `until`, closely: sleeps while far from it, then spins (a sleep overshoots by tens
// of microseconds, the size of the delays being emulated).
void WaitUntil(absl::Time until) {
  constexpr absl::Duration kSpin = absl::Microseconds(100);
  for (absl::Time now = absl::Now(); now < until; now = absl::Now()) {
    if (until - now > kSpin) absl::SleepFor(until - now - kSpin);
  }
}

uint64_t RandomClientId() {
  std::random_device rd;
  uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id == 0 ? 1 : id;
}

}  // namespace

Client::Client(std::string address, const ClientOptions& options)
    : address_(std::move(address)),
      options_(options),
      client_id_(options.client_id != 0 ? options.client_id : RandomClientId()) {}

Client::~Client() {
  absl::MutexLock lock(&mu_);
  keepalive_.reset();
  if (connection_ != nullptr) connection_->Close();
}

absl::StatusOr<ClientOptions> OptionsWithAuthFile(const std::string& auth_file,
                                                  ClientOptions options) {
  if (auth_file.empty()) return options;
  absl::StatusOr<security::Credentials> c = security::LoadCredentials(auth_file);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat("--auth-file: ", c.status().message()));
  }
  options.credentials = *std::move(c);
  return options;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(std::string_view address,
                                                        const ClientOptions& options) {
  ClientOptions resolved = options;
  if (!resolved.credentials.has_value() && resolved.credentials_from_environment) {
    ARDMA_ASSIGN_OR_RETURN(resolved.credentials, security::CredentialsFromEnvironment());
  }
  std::unique_ptr<Client> client(new Client(std::string(address), resolved));
  ARDMA_RETURN_IF_ERROR(client->CurrentConnection().status());
  return client;
}

absl::StatusOr<std::shared_ptr<Transport>> Client::CurrentConnection() {
  absl::MutexLock lock(&mu_);
  if (connection_ != nullptr && !connection_->broken()) return connection_;
  absl::Duration backoff = options_.backoff_initial;
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, options_.connect_attempts); ++attempt) {
    if (attempt > 0) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
    absl::StatusOr<std::shared_ptr<Transport>> c = OpenTransport(address_, options_, &counters_);
    if (c.ok()) {
      if (connected_once_) counters_.reconnects.fetch_add(1, std::memory_order_relaxed);
      connected_once_ = true;
      keepalive_.reset();
      if (connection_ != nullptr) connection_->Close();
      connection_ = std::move(*c);
      if (connection_->idle_timeout() > absl::ZeroDuration()) {
        keepalive_ = std::make_unique<KeepAlive>(connection_, connection_->idle_timeout() / 3);
      }
      loaded_.clear();  // the server may have restarted
      return connection_;
    }
    last = c.status();
    // A bad address, a server without UCX, refused credentials: trying again will not help.
    if (last.code() == absl::StatusCode::kInvalidArgument ||
        last.code() == absl::StatusCode::kFailedPrecondition ||
        last.code() == absl::StatusCode::kUnauthenticated ||
        last.code() == absl::StatusCode::kNotFound || last.code() == absl::StatusCode::kDataLoss) {
      return last;
    }
  }
  return absl::UnavailableError(absl::StrCat("ardmad at ", address_, " is unreachable after ",
                                             options_.connect_attempts,
                                             " attempts: ", last.message()));
}

absl::Duration Client::TimeoutFor(const CallOptions& options) const {
  return options.timeout > absl::ZeroDuration() ? options.timeout : options_.timeout;
}

absl::Time Client::DeadlineFor(const CallOptions& options) const {
  return FastNow() + TimeoutFor(options);
}

absl::Status Client::Flight(absl::Span<const OutgoingRequest> requests, const CallOptions& options,
                            bool retryable, absl::Span<ResponsePayload> results,
                            std::shared_ptr<Transport> first_connection) {
  const uint64_t abandoned = abandoned_.load(std::memory_order_acquire);
  // Counted from when the first attempt's requests are sent (no clock read before they go).
  LazyDeadline deadline = LazyDeadline::After(TimeoutFor(options));
  // Ids are fixed before the first attempt: a retry reuses them, so the server can recognise it.
  absl::InlinedVector<uint64_t, 4> ids(requests.size());
  uint64_t first = next_request_id_.fetch_add(requests.size(), std::memory_order_relaxed);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = first + i;
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<Transport> conn = std::move(first_connection);  // (attempt 0: if given)
    if (conn == nullptr) {
      ARDMA_ASSIGN_OR_RETURN(conn, CurrentConnection());
    }
    const bool delayed = options_.extra_round_trip_time > absl::ZeroDuration();
    absl::Time sent = delayed ? absl::Now() : absl::InfinitePast();  // no clock read otherwise
    absl::Status r =
        conn->RoundTrip(requests, ids, options.idempotent ? 0 : client_id_, deadline, results);
    if (delayed) WaitUntil(sent + options_.extra_round_trip_time);
    if (r.code() == absl::StatusCode::kUnavailable &&
        abandoned_.load(std::memory_order_acquire) != abandoned) {
      return AbandonedError();
    }
    if (r.ok() || r.code() != absl::StatusCode::kUnavailable || !retryable ||
        FastNow() >= deadline.Get() || attempt + 1 >= std::max(1, options_.connect_attempts)) {
      return r;
    }
    // A one-sided WRITE (UCX) may have landed before the failure, and the server cannot recognise
    // it: sending it again could put it over newer data. Not retried.
    for (const OutgoingRequest& request : requests) {
      if (!conn->Deduplicated(request)) return r;
    }
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
  }
}

absl::StatusOr<std::string> Client::Call(Op op, std::string payload, const CallOptions& options,
                                         bool retryable) {
  return Call({op, std::move(payload)}, options, retryable);
}

absl::StatusOr<std::string> Client::Call(OutgoingRequest request, const CallOptions& options,
                                         bool retryable) {
  // A one-sided operation the transport does on this thread (UCX) needs no flight: no request
  // ids, no vectors. A transport failure falls through to Flight's retry rules.
  std::shared_ptr<Transport> conn;  // the connection Flight's first attempt uses, if set here
  if (IsDataOperation(request) && options_.extra_round_trip_time == absl::ZeroDuration()) {
    const uint64_t abandoned = abandoned_.load(std::memory_order_acquire);
    ARDMA_ASSIGN_OR_RETURN(conn, CurrentConnection());
    ResponsePayload result;
    absl::StatusOr<bool> done = conn->Direct(request, TimeoutFor(options), &result);
    if (done.ok() && *done) return result;
    if (!done.ok() && abandoned_.load(std::memory_order_acquire) != abandoned) {
      return AbandonedError();
    }
    if (!done.ok()) {
      if (done.status().code() != absl::StatusCode::kUnavailable || !retryable ||
          !conn->Deduplicated(request)) {
        return done.status();
      }
      counters_.retries.fetch_add(1, std::memory_order_relaxed);
      conn = nullptr;  // broken: the retry connects anew
    }
  }
  ResponsePayload response;
  ARDMA_RETURN_IF_ERROR(Flight({&request, 1}, options, retryable, {&response, 1}, std::move(conn)));
  return response;
}

void Client::Abandon(std::string why) {
  std::shared_ptr<Transport> gone;
  {
    absl::MutexLock lock(&mu_);
    abandoned_why_ = std::move(why);
    abandoned_.fetch_add(1, std::memory_order_acq_rel);
    keepalive_.reset();
    gone = std::move(connection_);  // the next call connects anew
  }
  if (gone != nullptr) gone->Close();  // (fails the calls waiting on it)
}

absl::Status Client::AbandonedError() {
  absl::MutexLock lock(&mu_);
  return absl::UnavailableError(absl::StrCat("ardmad at ", address_, ": ", abandoned_why_));
}

absl::Status Client::Ping(const CallOptions& options) {
  return Call(Op::kPing, "", options, true).status();
}

absl::StatusOr<std::string> Client::Echo(std::string_view payload, const CallOptions& options) {
  return Call(Op::kPing, std::string(payload), options, true);
}

absl::StatusOr<std::string> Client::Read(uint64_t addr, uint32_t len, RegionId region,
                                         const CallOptions& options) {
  // Over UCX: straight into the answer (ReadInto's path), without a request.
  if (options_.extra_round_trip_time == absl::ZeroDuration() &&
      len <= options_.limits.max_payload_bytes) {
    ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<Transport> conn, CurrentConnection());
    if (conn->ReadsDirectly()) {
      std::string data(len, '\0');
      ReadOp op{addr, std::span<char>(data), region};
      absl::Status answer;
      ARDMA_ASSIGN_OR_RETURN(bool done, DirectReads(*conn, {&op, 1}, options, &answer));
      if (done) {
        ARDMA_RETURN_IF_ERROR(answer);
        return data;
      }
    }
  }
  OutgoingRequest request{Op::kRead};
  request.data = OutgoingRequest::Reads{{region, addr, len}};
  ARDMA_ASSIGN_OR_RETURN(std::string data, Call(std::move(request), options, true));
  if (data.size() != len) return absl::InternalError("READ response of the wrong size");
  return data;
}

absl::StatusOr<bool> Client::DirectReads(Transport& conn, std::span<const ReadOp> ops,
                                         const CallOptions& options, absl::Status* answer) {
  absl::StatusOr<bool> done = conn.DirectReads(ops, TimeoutFor(options), answer);
  // A broken transport: the caller's flight connects anew, as Call's retry would.
  if (!done.ok() && done.status().code() == absl::StatusCode::kUnavailable) return false;
  return done;
}

absl::Status Client::ReadInto(std::span<const ReadOp> ops, const CallOptions& options) {
  if (ops.empty()) return absl::OkStatus();
  if (options_.extra_round_trip_time == absl::ZeroDuration()) {
    ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<Transport> conn, CurrentConnection());
    absl::Status answer;
    ARDMA_ASSIGN_OR_RETURN(bool done, DirectReads(*conn, ops, options, &answer));
    if (done) return answer;
  }
  if (ops.size() == 1) {
    if (ops[0].out.size() > UINT32_MAX) return absl::InvalidArgumentError("read too large");
    ARDMA_ASSIGN_OR_RETURN(
        std::string data,
        Read(ops[0].addr, static_cast<uint32_t>(ops[0].out.size()), ops[0].region, options));
    std::memcpy(ops[0].out.data(), data.data(), data.size());
    return absl::OkStatus();
  }
  class Batch batch(this);
  for (const ReadOp& op : ops) {
    if (op.out.size() > UINT32_MAX) return absl::InvalidArgumentError("read too large");
    batch.Read(op.addr, static_cast<uint32_t>(op.out.size()), op.region);
  }
  ARDMA_ASSIGN_OR_RETURN(Batch::Result result, batch.Send(options));
  for (size_t i = 0; i < ops.size(); ++i) {
    std::memcpy(ops[i].out.data(), result.reads[i].data(), ops[i].out.size());
  }
  return absl::OkStatus();
}

absl::Status Client::Write(uint64_t addr, std::string_view data, RegionId region,
                           const CallOptions& options) {
  OutgoingRequest request{Op::kWrite};
  request.data = OutgoingRequest::Writes{{region, addr, data}};
  return Call(std::move(request), options, true).status();
}

absl::StatusOr<CasResult> Client::CompareAndSwap(uint64_t addr, uint64_t expected, uint64_t desired,
                                                 RegionId region, const CallOptions& options) {
  OutgoingRequest request{Op::kCas};
  request.data = wire::CasRequest{region, addr, expected, desired};
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(std::move(request), options, false));
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, wire::DecodeU64Response(r));
  return CasResult{old == expected, old};
}

absl::StatusOr<uint64_t> Client::FetchAdd(uint64_t addr, uint64_t delta, RegionId region,
                                          const CallOptions& options) {
  OutgoingRequest request{Op::kFetchAdd};
  request.data = wire::FetchAddRequest{region, addr, delta};
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(std::move(request), options, false));
  return wire::DecodeU64Response(r);
}

absl::StatusOr<wire::CodeHash> Client::Load(wire::CodeKind kind, std::string_view library_name,
                                            std::string_view code, const CallOptions& options,
                                            std::vector<wire::CodeHash> deps) {
  if (library_name.size() > wire::kMaxNameLength) {
    return absl::InvalidArgumentError("library name too long");
  }
  if (deps.size() > wire::kMaxLoadDeps) return absl::InvalidArgumentError("too many dependencies");
  std::string payload;
  wire::EncodeLoadRequest({kind, library_name, code, std::move(deps)}, &payload);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(Op::kLoad, std::move(payload), options, true));
  return wire::DecodeHash(r);
}

absl::StatusOr<bool> Client::HasCode(const wire::CodeHash& hash, const CallOptions& options) {
  std::string payload;
  wire::EncodeHash(hash, &payload);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(Op::kHasCode, std::move(payload), options, true));
  return wire::DecodeHasCodeResponse(r);
}

namespace {

// An EXECUTE's header flags for `options`.
uint16_t ExecuteFlags(const CallOptions& options) {
  return static_cast<uint16_t>((options.peer ? wire::kFlagPeer : 0) |
                               (options.peer && options.replica ? wire::kFlagReplica : 0) |
                               (options.stale_read ? wire::kFlagStaleRead : 0));
}

// An EXECUTE of `function` (in library `hash` if given) as values: views of the caller's name and
// arguments.
absl::StatusOr<wire::ExecuteRequest> MakeExecute(const wire::CodeHash* hash,
                                                 std::string_view function, std::string_view args,
                                                 absl::Duration timeout) {
  if (function.empty() || function.size() > wire::kMaxNameLength) {
    return absl::InvalidArgumentError("bad function name");
  }
  wire::ExecuteRequest req;
  req.by_hash = hash != nullptr;
  if (hash != nullptr) req.hash = *hash;
  req.function = function;
  req.timeout_us = static_cast<uint64_t>(absl::ToInt64Microseconds(timeout));
  req.args = args;
  return req;
}

}  // namespace

absl::Duration Client::ServerDeadline(const CallOptions& options) const {
  if (options.server_deadline > absl::ZeroDuration()) return options.server_deadline;
  return options.timeout > absl::ZeroDuration() ? options.timeout : options_.timeout;
}

absl::StatusOr<std::string> Client::Execute(std::string_view function, std::string_view args,
                                            const CallOptions& options) {
  ARDMA_ASSIGN_OR_RETURN(wire::ExecuteRequest req,
                         MakeExecute(nullptr, function, args, ServerDeadline(options)));
  return Call({.op = Op::kExecute, .data = req, .flags = ExecuteFlags(options)}, options, true);
}

absl::StatusOr<std::string> Client::Execute(const wire::CodeHash& library,
                                            std::string_view function, std::string_view args,
                                            const CallOptions& options) {
  ARDMA_ASSIGN_OR_RETURN(wire::ExecuteRequest req,
                         MakeExecute(&library, function, args, ServerDeadline(options)));
  return Call({.op = Op::kExecute, .data = req, .flags = ExecuteFlags(options)}, options, true);
}

std::future<absl::StatusOr<std::string>> Client::ExecuteAsync(std::string_view function,
                                                              std::string_view args,
                                                              const CallOptions& options) {
  return FutureExecute(nullptr, function, args, options);
}

std::future<absl::StatusOr<std::string>> Client::ExecuteAsync(const wire::CodeHash& library,
                                                              std::string_view function,
                                                              std::string_view args,
                                                              const CallOptions& options) {
  return FutureExecute(&library, function, args, options);
}

std::future<absl::StatusOr<std::string>> Client::FutureExecute(const wire::CodeHash* library,
                                                               std::string_view function,
                                                               std::string_view args,
                                                               const CallOptions& options) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<std::string>>>();
  std::future<absl::StatusOr<std::string>> future = promise->get_future();
  SendExecute(
      library, function, args, [promise](ResponsePayload r) { promise->set_value(std::move(r)); },
      options);
  return future;
}

void Client::ExecuteAsync(std::string_view function, std::string_view args, ResponseCallback done,
                          const CallOptions& options) {
  SendExecute(nullptr, function, args, std::move(done), options);
}

void Client::SendExecute(const wire::CodeHash* library, std::string_view function,
                         std::string_view args, ResponseCallback done,
                         const CallOptions& options) {
  absl::StatusOr<wire::ExecuteRequest> req =
      MakeExecute(library, function, args, ServerDeadline(options));
  if (!req.ok()) {
    done(req.status());
    return;
  }
  std::string payload;  // (the call outlives the caller's views)
  wire::EncodeExecuteRequest(*req, &payload);
  CallAsync(Op::kExecute, std::move(payload), std::move(done), options, ExecuteFlags(options));
}

absl::StatusOr<std::vector<wire::StatsEntry>> Client::Stats(const CallOptions& options) {
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(Op::kStats, "", options, true));
  return wire::DecodeStatsResponse(r, options_.limits);
}

absl::StatusOr<wire::UcxRegionKey> Client::RegisterFile(std::string_view path, bool writable,
                                                        uint64_t size, const CallOptions& options) {
  wire::RegisterRequest req{.kind = wire::RegisterKind::kFile, .writable = writable, .size = size};
  req.path = path;
  std::string payload;
  wire::EncodeRegisterRequest(req, &payload);
  // Not retried: a region lives as long as the connection that registered it.
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(Op::kRegister, std::move(payload), options, false));
  return wire::DecodeRegionKey(r);
}

absl::StatusOr<wire::UcxRegionKey> Client::RegisterMemfd(int fd, bool writable, uint64_t size,
                                                         const CallOptions& options) {
  if (fd < 0) return absl::InvalidArgumentError("RegisterMemfd: no descriptor");
  wire::RegisterRequest req{.kind = wire::RegisterKind::kMemfd, .writable = writable, .size = size};
  req.fd = static_cast<uint32_t>(fd);
  std::string payload;
  wire::EncodeRegisterRequest(req, &payload);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(Op::kRegister, std::move(payload), options, false));
  return wire::DecodeRegionKey(r);
}

absl::Status Client::Deregister(RegionId region, const CallOptions& options) {
  std::string payload;
  wire::EncodeRegionId(region, &payload);
  return Call(Op::kDeregister, std::move(payload), options, false).status();
}

absl::StatusOr<wire::UcxRegionKey> Client::RegionInfo(RegionId region, const CallOptions& options) {
  std::string payload;
  wire::EncodeRegionId(region, &payload);
  ARDMA_ASSIGN_OR_RETURN(std::string r, Call(Op::kRegionInfo, std::move(payload), options, true));
  return wire::DecodeRegionKey(r);
}

void Client::ForgetRegion(RegionId region) {
  absl::MutexLock lock(&mu_);
  if (connection_ != nullptr) connection_->ForgetRegion(region);
}

void Client::CallAsync(Op op, std::string payload, ResponseCallback done,
                       const CallOptions& options, uint16_t flags) {
  absl::StatusOr<std::shared_ptr<Transport>> conn = CurrentConnection();
  if (!conn.ok()) {
    done(conn.status());
    return;
  }
  uint64_t id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
  (*conn)->Async({.op = op, .payload = std::move(payload), .flags = flags}, id,
                 options.idempotent ? 0 : client_id_,
                 DeadlineFor(options), std::move(done));
}

absl::StatusOr<std::string> Client::TransportDescription() {
  ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<Transport> transport, CurrentConnection());
  return transport->Describe();
}

absl::Duration Client::idle_timeout() {
  absl::StatusOr<std::shared_ptr<Transport>> transport = CurrentConnection();
  return transport.ok() ? (*transport)->idle_timeout() : absl::ZeroDuration();
}

LockOwner Client::lock_owner() {
  absl::StatusOr<std::shared_ptr<Transport>> transport = CurrentConnection();
  return transport.ok() ? (*transport)->lock_owner() : LockOwner{};
}

bool Client::KnownLoaded(const wire::CodeHash& hash) {
  absl::MutexLock lock(&mu_);
  return loaded_.contains(hash);
}

void Client::MarkLoaded(const wire::CodeHash& hash) {
  absl::MutexLock lock(&mu_);
  loaded_.insert(hash);
}

void Client::ForgetLoaded() {
  absl::MutexLock lock(&mu_);
  loaded_.clear();
}

// Batch.

Batch& Batch::Read(uint64_t addr, uint32_t len, RegionId region) {
  ops_.push_back({Kind::kRead, region, addr, len, {}});
  return *this;
}

Batch& Batch::Write(uint64_t addr, std::string_view data, RegionId region) {
  ops_.push_back({Kind::kWrite, region, addr, 0, std::string(data)});
  return *this;
}

Batch& Batch::CompareAndSwap(uint64_t addr, uint64_t expected, uint64_t desired, RegionId region) {
  ops_.push_back({Kind::kCas, region, addr, 0, {}, expected, desired});
  return *this;
}

Batch& Batch::FetchAdd(uint64_t addr, uint64_t delta, RegionId region) {
  ops_.push_back({Kind::kFetchAdd, region, addr, 0, {}, delta});
  return *this;
}

absl::StatusOr<Batch::Result> Batch::Send(const CallOptions& options) {
  Result result;
  if (ops_.empty()) return result;
  // Group runs of reads and of writes into one frame each; atomics are a frame apiece.
  std::vector<OutgoingRequest> requests;
  std::vector<std::pair<Kind, size_t>> frames;  // kind, number of ops in the frame
  bool retryable = true;
  for (size_t i = 0; i < ops_.size();) {
    const Op& op = ops_[i];
    size_t j = i;
    if (op.kind == Kind::kRead) {
      OutgoingRequest::Reads entries;
      for (; j < ops_.size() && ops_[j].kind == Kind::kRead; ++j) {
        entries.push_back({ops_[j].region, ops_[j].addr, ops_[j].len});
      }
      requests.push_back({wire::Op::kRead, {}, std::move(entries)});
    } else if (op.kind == Kind::kWrite) {
      OutgoingRequest::Writes entries;
      for (; j < ops_.size() && ops_[j].kind == Kind::kWrite; ++j) {
        entries.push_back({ops_[j].region, ops_[j].addr, ops_[j].data});
      }
      requests.push_back({wire::Op::kWrite, {}, std::move(entries)});
    } else if (op.kind == Kind::kCas) {
      requests.push_back({wire::Op::kCas, {}, wire::CasRequest{op.region, op.addr, op.a, op.b}});
      retryable = false;
      j = i + 1;
    } else {
      requests.push_back(
          {wire::Op::kFetchAdd, {}, wire::FetchAddRequest{op.region, op.addr, op.a}});
      retryable = false;
      j = i + 1;
    }
    frames.emplace_back(op.kind, j - i);
    i = j;
  }
  std::vector<ResponsePayload> responses(requests.size());
  ARDMA_RETURN_IF_ERROR(client_->Flight(requests, options, retryable, absl::MakeSpan(responses)));
  size_t op_index = 0;
  for (size_t f = 0; f < frames.size(); ++f) {
    ARDMA_RETURN_IF_ERROR(responses[f].status());
    const std::string& payload = *responses[f];
    auto [kind, count] = frames[f];
    if (kind == Kind::kRead) {
      size_t pos = 0;
      for (size_t k = 0; k < count; ++k) {
        uint32_t len = ops_[op_index + k].len;
        if (pos + len > payload.size()) return absl::InternalError("short READ response");
        result.reads.push_back(payload.substr(pos, len));
        pos += len;
      }
    } else if (kind == Kind::kCas) {
      ARDMA_ASSIGN_OR_RETURN(uint64_t old, wire::DecodeU64Response(payload));
      result.cas.push_back({old == ops_[op_index].a, old});
    } else if (kind == Kind::kFetchAdd) {
      ARDMA_ASSIGN_OR_RETURN(uint64_t old, wire::DecodeU64Response(payload));
      result.fetch_adds.push_back(old);
    }
    op_index += count;
  }
  return result;
}

}  // namespace ardma
