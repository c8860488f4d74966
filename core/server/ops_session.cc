// The session ops (core/security/auth.h, docs/SECURITY.md): the greeting, AUTH, UCX_CONNECT, and
// the one permission check every other op passes (its row in RequestHandler::Row).
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/server/request_handler.h"
#include "core/status_macros.h"

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
  counters_.Add(Stat::kBytesOut, out.size());
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
  counters_.Add(Stat::kAuthOk, 1);
}

void RequestHandler::InheritAuth(const ResponseSink& from, ResponseSink& to) {
  to.auth().peer_pid = from.auth().peer_pid;
  const security::Grant* grant = from.auth().Granted();
  if (grant == nullptr) return;
  to.auth().name = from.auth().name;
  to.auth().grant = *grant;
  to.auth().authenticated.store(true, std::memory_order_release);
}

absl::Status RequestHandler::Allowed(Op op, const OpRow& row, const security::Grant& grant) {
  if (row.permissions == 0 || (grant.permissions & row.permissions) != 0) return absl::OkStatus();
  // Named as the first permission that would do (HAS_CODE: exec, or load).
  uint32_t first = row.permissions & (~row.permissions + 1);
  security::Grant want{.permissions = first};
  return absl::PermissionDeniedError(absl::StrCat(wire::OpName(op), " needs the '", want.ToString(),
                                                  "' permission; this secret has ",
                                                  grant.ToString()));
}

absl::Status RequestHandler::RefuseHello(const Request&, std::string*) {
  return absl::InvalidArgumentError("HELLO is sent by the server only");
}

absl::Status RequestHandler::UcxConnect(const Request& request, std::string* out) {
  if (!ucx_connect_) {
    return absl::FailedPreconditionError(
        "this server does not offer UCX (started with --ucx off, or UCX failed to start)");
  }
  ARDMA_ASSIGN_OR_RETURN(std::string hello, ucx_connect_(request.payload, request.sink));
  out->append(hello);
  return absl::OkStatus();
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
    counters_.Add(Stat::kAuthRefused, 1);
    counters_.Add(Stat::kErrors, 1);
    ARDMA_LOG(kWarning, "authentication failed%s; closing the connection",
              req.ok() ? absl::StrCat(" for '", std::string(req->name), "'") : std::string());
    std::string frame = wire::EncodeErrorResponse(
        header, req.ok() ? absl::UnauthenticatedError("authentication failed: unknown name or "
                                                      "wrong secret")
                         : req.status());
    counters_.Add(Stat::kBytesOut, frame.size());
    sink->SendAndClose(std::move(frame));
    return;
  }
  auth.name = std::string(req->name);
  auth.grant = entry->grant;
  auth.authenticated.store(true, std::memory_order_release);
  counters_.Add(Stat::kAuthOk, 1);
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
