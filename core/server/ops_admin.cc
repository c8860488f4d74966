// The admin ops: STATS (details only with the admin permission) and the regions clients
// register at run time: REGISTER, DEREGISTER, REGION_INFO (region_registrar.h).
#include "absl/strings/str_cat.h"
#include "core/server/request_handler.h"
#include "core/status_macros.h"

namespace ardma {

using wire::FrameHeader;
using wire::Op;

absl::Status RequestHandler::StatsOp(const Request& request, std::string* out) {
  if (!request.payload.empty()) return absl::InvalidArgumentError("STATS takes no payload");
  wire::EncodeStatsResponse(request.grant.Has(security::kAdmin) ? Stats() : StatsSummary(), out);
  return absl::OkStatus();
}

absl::Status RequestHandler::Regions(const Request& request, std::string* out) {
  const FrameHeader& header = request.header;
  std::string_view payload = request.payload;
  const std::shared_ptr<ResponseSink>& sink = request.sink;
  const security::Grant& grant = request.grant;
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

}  // namespace ardma
