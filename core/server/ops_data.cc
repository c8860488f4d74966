// The data ops: PING, and READ, WRITE, CAS, FETCH_ADD on the regions (each checked against the
// connection's grant region by region).
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/server/request_handler.h"
#include "core/status_macros.h"

namespace ardma {

using wire::FrameHeader;

absl::Status RequestHandler::MayAccess(const security::Grant& grant, RegionId region, bool write) {
  if (write ? grant.MayWrite(region) : grant.MayRead(region)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("this secret may not ", write ? "write" : "read",
                                                  " region ", region, " (it has ", grant.ToString(),
                                                  ")"));
}

absl::Status RequestHandler::Ping(const Request& request, std::string* out) {
  out->append(request.payload.data(), request.payload.size());
  return absl::OkStatus();
}

absl::Status RequestHandler::Read(const Request& request, std::string* out) {
  const security::Grant& grant = request.grant;
  ARDMA_ASSIGN_OR_RETURN(std::vector<wire::ReadEntry> entries,
                         wire::DecodeReadRequest(request.payload, options_.limits));
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

absl::Status RequestHandler::Write(const Request& request, std::string* out) {
  const FrameHeader& header = request.header;
  // A retried WRITE (same client and request id, after a broken connection) must not apply
  // again: it could overwrite what was written since. De-duplicated as EXECUTE is.
  const bool deduplicated = header.client_id != 0;
  if (deduplicated && !AdmitOnce(header, request.sink)) {
    request.answered = true;
    return absl::OkStatus();
  }
  absl::Status status = WriteEntries(request.payload, request.grant);
  if (deduplicated) {
    dedup_.Finish(header.client_id, header.request_id,
                  status.ok() ? absl::StatusOr<std::string>(std::string()) : status);
  }
  return status;
}

absl::Status RequestHandler::WriteEntries(std::string_view payload, const security::Grant& grant) {
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

absl::Status RequestHandler::Cas(const Request& request, std::string* out) {
  ARDMA_ASSIGN_OR_RETURN(wire::CasRequest req, wire::DecodeCasRequest(request.payload));
  ARDMA_RETURN_IF_ERROR(MayAccess(request.grant, req.region, /*write=*/true));
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(req.region));
  ARDMA_ASSIGN_OR_RETURN(CasResult r, region->CompareAndSwap(req.addr, req.expected, req.desired));
  if (r.swapped) ARDMA_RETURN_IF_ERROR(syncer_.Wrote(*region, req.addr, 8));
  wire::EncodeU64Response(r.observed, out);
  return absl::OkStatus();
}

absl::Status RequestHandler::FetchAdd(const Request& request, std::string* out) {
  ARDMA_ASSIGN_OR_RETURN(wire::FetchAddRequest req, wire::DecodeFetchAddRequest(request.payload));
  ARDMA_RETURN_IF_ERROR(MayAccess(request.grant, req.region, /*write=*/true));
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, regions_->Get(req.region));
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, region->FetchAdd(req.addr, req.delta));
  ARDMA_RETURN_IF_ERROR(syncer_.Wrote(*region, req.addr, 8));
  wire::EncodeU64Response(old, out);
  return absl::OkStatus();
}

}  // namespace ardma
