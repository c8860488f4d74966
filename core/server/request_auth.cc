// The RequestHandler's authentication and permission checks (core/security/auth.h,
// docs/SECURITY.md): the greeting, AUTH, and what each op needs.
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/server/request_handler.h"

namespace ardma {

using wire::FrameHeader;
using wire::Op;

std::string RequestHandler::Greeting(ResponseSink& sink) {
  wire::Hello hello;
  ConnectionAuth& auth = sink.auth();
  if (options_.auth == nullptr) {
    auth.grant = security::FullGrant();
    auth.authenticated.store(true, std::memory_order_release);
  } else if (auth.Granted() == nullptr) {
    auth.nonce = security::RandomNonce();
    hello.auth_required = true;
    hello.nonce = auth.nonce;
  }
  if (owners_ != nullptr) {
    LockOwner owner = owners_->Join();
    static std::atomic<bool> warned{false};
    if (owner.token == 0 && !warned.exchange(true)) {
      ARDMA_LOG(kWarning,
                "every one of the %u lock-owner slots is taken: locks of connections beyond them "
                "are never taken over if they die (logged once)",
                owners_->slots());
    }
    auth.owner_token = owner.token;
    hello.owner_token = owner.token;
    hello.owner_table = owner.table;
  }
  hello.idle_timeout_ms = limits().idle_timeout_ms;
  std::string out;
  size_t start = wire::BeginFrame(&out);
  wire::EncodeHello(hello, &out);
  wire::FinishFrame({.op = Op::kHello, .flags = wire::kFlagResponse}, start, &out);
  ServerCounters::Add(counters_.bytes_out, out.size());
  return out;
}

void RequestHandler::AuthenticateCertificate(ResponseSink& sink, std::string_view name) {
  ConnectionAuth& auth = sink.auth();
  if (options_.auth == nullptr) return;  // Greeting grants everything
  const security::AuthTable::Entry* entry = options_.auth->Find(name);
  if (entry == nullptr) {
    ARDMA_LOG(kInfo, "client certificate '%s' names no secret: the connection must authenticate",
              std::string(name));
    return;
  }
  auth.name = std::string(name);
  auth.grant = entry->grant;
  auth.authenticated.store(true, std::memory_order_release);
  ServerCounters::Add(counters_.auth_ok, 1);
}

void RequestHandler::InheritAuth(const ResponseSink& from, ResponseSink& to) {
  to.auth().peer_pid = from.auth().peer_pid;
  const security::Grant* grant = from.auth().Granted();
  if (grant == nullptr) return;
  to.auth().name = from.auth().name;
  to.auth().grant = *grant;
  to.auth().authenticated.store(true, std::memory_order_release);
}

absl::Status RequestHandler::Allowed(Op op, const security::Grant& grant) {
  security::Permission needed;
  switch (op) {
    case Op::kPing:
    case Op::kStats:       // details only with admin (Handle)
    case Op::kUcxConnect:  // the session gets this connection's grant (ucx_server.cc)
    case Op::kHello:
    case Op::kAuth:
      return absl::OkStatus();
    case Op::kRead:
    case Op::kRegionInfo:
      needed = security::kRead;
      break;
    case Op::kRegister:  // maps the client's own memory for others (docs/SECURITY.md)
    case Op::kDeregister:
    case Op::kWrite:
    case Op::kCas:
    case Op::kFetchAdd:
      needed = security::kWrite;
      break;
    case Op::kExecute:
      needed = security::kExec;
      break;
    case Op::kHasCode:
      if (grant.Has(security::kExec) || grant.Has(security::kLoad)) return absl::OkStatus();
      needed = security::kExec;
      break;
    case Op::kLoad:
      needed = security::kLoad;
      break;
    default:
      return absl::OkStatus();  // unknown ops are refused by Handle
  }
  if (grant.Has(needed)) return absl::OkStatus();
  security::Grant want{.permissions = static_cast<uint32_t>(needed)};
  return absl::PermissionDeniedError(absl::StrCat(wire::OpName(op), " needs the '", want.ToString(),
                                                  "' permission; this secret has ",
                                                  grant.ToString()));
}

absl::Status RequestHandler::MayAccess(const security::Grant& grant, RegionId region, bool write) {
  if (write ? grant.MayWrite(region) : grant.MayRead(region)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("this secret may not ", write ? "write" : "read",
                                                  " region ", region, " (it has ", grant.ToString(),
                                                  ")"));
}

void RequestHandler::HandleAuth(const FrameHeader& header, std::string_view payload,
                                const std::shared_ptr<ResponseSink>& sink) {
  ConnectionAuth& auth = sink->auth();
  if (options_.auth == nullptr) {
    ReplyError(sink, header,
               absl::FailedPreconditionError("this server does not use authentication"));
    return;
  }
  if (auth.Granted() != nullptr) {
    ReplyError(sink, header, absl::FailedPreconditionError("this connection is authenticated"));
    return;
  }
  absl::StatusOr<wire::AuthRequest> req = wire::DecodeAuthRequest(payload);
  const security::AuthTable::Entry* entry = req.ok() ? options_.auth->Find(req->name) : nullptr;
  bool ok = false;
  if (entry != nullptr) {
    security::Proof expected = security::ComputeProof(entry->secret, security::Role::kClient,
                                                      auth.nonce, req->client_nonce, req->name);
    ok = security::ProofsEqual(expected, req->proof);
  }
  if (!ok) {
    // One message for an unknown name and a wrong secret: names are not to be guessed here. The
    // connection closes, so its challenge cannot be tried twice.
    ServerCounters::Add(counters_.auth_refused, 1);
    ServerCounters::Add(counters_.errors, 1);
    ARDMA_LOG(kWarning, "authentication failed%s; closing the connection",
              req.ok() ? absl::StrCat(" for '", std::string(req->name), "'") : std::string());
    std::string frame = wire::EncodeErrorResponse(
        header, req.ok() ? absl::UnauthenticatedError("authentication failed: unknown name or "
                                                      "wrong secret")
                         : req.status());
    ServerCounters::Add(counters_.bytes_out, frame.size());
    sink->SendAndClose(std::move(frame));
    return;
  }
  auth.name = std::string(req->name);
  auth.grant = entry->grant;
  auth.authenticated.store(true, std::memory_order_release);
  ServerCounters::Add(counters_.auth_ok, 1);
  ARDMA_LOG(kDebug, "connection authenticated as '%s' (%s)", auth.name, auth.grant.ToString());
  wire::AuthResponse resp{.proof = security::ComputeProof(entry->secret, security::Role::kServer,
                                                          auth.nonce, req->client_nonce, req->name),
                          .permissions = entry->grant.permissions};
  std::string out;
  size_t start = wire::BeginFrame(&out);
  wire::EncodeAuthResponse(resp, &out);
  FrameHeader h = header;
  h.flags = wire::kFlagResponse;
  h.status = 0;
  wire::FinishFrame(h, start, &out);
  Reply(sink, std::move(out));
}

}  // namespace ardma
