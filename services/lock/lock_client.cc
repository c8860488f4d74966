#include "services/lock/lock_client.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::lock {
namespace {

// An active-mode acquire waits on the server; its request may live this much longer than the wait,
// so the server, not the request's deadline, ends the wait (and gives the ticket back).
constexpr absl::Duration kServerSlack = absl::Seconds(10);

std::string HeldArgs(const Grant& g) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U64(g.addr);
  w.U64(g.ticket);
  w.U64(g.word);
  return out;
}

}  // namespace

absl::StatusOr<std::string> LockClient::Call(Client& client, Mode mode, std::string_view function,
                                             std::string_view args, absl::Duration wait) {
  CallOptions options = options_;
  if (mode == Mode::kActive && wait > absl::ZeroDuration()) {
    absl::Duration base =
        options.timeout > absl::ZeroDuration() ? options.timeout : absl::Seconds(30);
    options.timeout = std::max(base, wait + kServerSlack);
  }
  return Invoke(client, mode, active_libraries::lock(), function, args, options);
}

absl::Duration LockClient::RedirectTimeout() const {
  return options_.timeout > absl::ZeroDuration() ? options_.timeout : absl::Seconds(30);
}

absl::StatusOr<std::string> LockClient::Call(std::string_view name, Mode mode,
                                             std::string_view function, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(Client * client, servers_->For(kLockSpace, name));
  return Call(*client, mode, function, args);
}

absl::Status LockClient::Kick(Client& client, uint64_t addr) {
  std::string args;
  wire::ByteWriter(&args).U64(addr);
  return Call(client, Mode::kActive, "lock.kick", args).status();
}

absl::StatusOr<std::optional<Grant>> LockClient::Run(std::string_view name, LockMode mode,
                                                     absl::Duration wait, absl::Duration lease) {
  ARDMA_RETURN_IF_ERROR(CheckLockName(name));
  ARDMA_RETURN_IF_ERROR(CheckLease(lease));
  AcquireArgs args{
      .name = name, .exclusive = mode == LockMode::kExclusive, .wait = wait, .lease = lease};
  // One attempt on one server: with the cached block address (RDMA mode), or letting the name be
  // resolved.
  struct Sent {
    Client* client = nullptr;
    AcquireResult result;
    uint64_t addr = 0;
    absl::Time at;
  };
  auto attempt = [&](Client& client, std::optional<uint64_t> cached) -> absl::StatusOr<Sent> {
    args.addr = cached.value_or(0);
    Sent sent{.client = &client, .addr = args.addr, .at = absl::Now()};
    absl::StatusOr<std::string> result =
        Call(client, mode_, "lock.acquire", EncodeAcquireArgs(args), wait);
    if (!result.ok()) {
      if (mode_ == Mode::kRdma && absl::IsDeadlineExceeded(result.status()) && args.addr != 0) {
        // Our ticket went back: an active waiter may be next.
        Kick(client, args.addr).IgnoreError();
      }
      return result.status();
    }
    ARDMA_ASSIGN_OR_RETURN(sent.result, DecodeAcquireResult(*result));
    return sent;
  };
  auto on = [&](Client& client) -> absl::StatusOr<Sent> {
    if (mode_ == Mode::kActive) return attempt(client, std::nullopt);
    return addrs_.Run<Sent>(ServerScopedName(client, name), [&](std::optional<uint64_t> cached) {
      return attempt(client, cached);
    });
  };
  ARDMA_ASSIGN_OR_RETURN(
      Sent sent,
      RouteToSlot<Sent>(*servers_, slots::SlotOf(kLockSpace, name), RedirectTimeout(),
                        SlotSubject{"lock", name}, on));
  const AcquireResult& r = sent.result;
  if (!r.granted) {
    if (r.kick && sent.addr != 0) ARDMA_RETURN_IF_ERROR(Kick(*sent.client, sent.addr));
    return std::nullopt;
  }
  if (mode_ == Mode::kRdma) addrs_.Store(ServerScopedName(*sent.client, name), r.addr);
  Grant g;
  g.name = std::string(name);
  g.mode = mode;
  g.token = r.token;
  g.lease = lease;
  g.lease_deadline = sent.at + lease;
  g.addr = r.addr;
  g.ticket = r.ticket;
  g.word = r.word;
  return g;
}

absl::StatusOr<Grant> LockClient::Acquire(std::string_view name, LockMode mode,
                                          absl::Duration timeout, absl::Duration lease) {
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lock: Acquire needs a positive timeout (or TryAcquire)");
  }
  ARDMA_ASSIGN_OR_RETURN(std::optional<Grant> g, Run(name, mode, timeout, lease));
  if (!g) return absl::DeadlineExceededError("lock: not acquired within the wait");
  return *std::move(g);
}

absl::StatusOr<std::optional<Grant>> LockClient::TryAcquire(std::string_view name, LockMode mode,
                                                            absl::Duration lease) {
  return Run(name, mode, absl::ZeroDuration(), lease);
}

absl::Status LockClient::Release(const Grant& grant) {
  ARDMA_ASSIGN_OR_RETURN(Client * client, servers_->For(kLockSpace, grant.name));
  ARDMA_ASSIGN_OR_RETURN(std::string kick, Call(*client, mode_, "lock.release", HeldArgs(grant)));
  if (mode_ == Mode::kRdma && !kick.empty() && kick[0] != 0) return Kick(*client, grant.addr);
  return absl::OkStatus();
}

absl::Status LockClient::Renew(Grant& grant, absl::Duration lease) {
  ARDMA_RETURN_IF_ERROR(CheckLease(lease));
  std::string args = HeldArgs(grant);
  wire::ByteWriter(&args).U64(static_cast<uint64_t>(absl::ToInt64Microseconds(lease)));
  absl::Time sent = absl::Now();
  absl::StatusOr<std::string> word = Call(grant.name, mode_, "lock.renew", args);
  if (!word.ok()) return word.status();
  wire::ByteReader r(*word);
  if (!r.U64(&grant.word) || !r.AtEnd()) return absl::DataLossError("lock.renew: bad result");
  grant.lease = lease;
  grant.lease_deadline = sent + lease;
  return absl::OkStatus();
}

absl::StatusOr<LockState> LockClient::Inspect(std::string_view name) {
  ARDMA_RETURN_IF_ERROR(CheckLockName(name));
  std::string args;
  wire::ByteWriter(&args).Str16(name);
  absl::StatusOr<std::string> bytes =
      RouteToSlot<std::string>(*servers_, slots::SlotOf(kLockSpace, name), RedirectTimeout(),
                               SlotSubject{"lock", name}, [&](Client& client) {
                                 return Call(client, mode_, "lock.inspect", args);
                               });
  if (!bytes.ok()) return bytes.status();
  wire::ByteReader r(*bytes);
  uint64_t addr;
  LockState s;
  if (!r.U64(&addr) || !r.U64(&s.tickets_taken) || !r.U64(&s.tokens_issued) || !r.U64(&s.holders) ||
      !r.U64(&s.waiters) || !r.AtEnd()) {
    return absl::DataLossError("lock.inspect: bad result");
  }
  return s;
}

absl::StatusOr<LockGuard> LockGuard::Acquire(LockClient& locks, std::string_view name,
                                             LockMode mode, absl::Duration timeout,
                                             absl::Duration lease) {
  ARDMA_ASSIGN_OR_RETURN(Grant g, locks.Acquire(name, mode, timeout, lease));
  return LockGuard(&locks, std::move(g));
}

LockGuard::LockGuard(LockGuard&& other) noexcept
    : locks_(std::exchange(other.locks_, nullptr)), grant_(std::move(other.grant_)) {}

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    if (locks_ != nullptr) locks_->Release(grant_).IgnoreError();
    locks_ = std::exchange(other.locks_, nullptr);
    grant_ = std::move(other.grant_);
  }
  return *this;
}

LockGuard::~LockGuard() {
  if (locks_ != nullptr) locks_->Release(grant_).IgnoreError();
}

absl::Status LockGuard::Renew(absl::Duration lease) {
  if (locks_ == nullptr) return absl::FailedPreconditionError("lock: already released");
  return locks_->Renew(grant_, lease);
}

absl::Status LockGuard::Release() {
  if (locks_ == nullptr) return absl::FailedPreconditionError("lock: already released");
  return std::exchange(locks_, nullptr)->Release(grant_);
}

}  // namespace ardma::lock
