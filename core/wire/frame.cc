#include "core/wire/frame.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

// Header grammar (all integers little-endian):
//
//   header := magic:u32  version:u8  op:u8  flags:u16  status:u16  reserved:u16
//             payload_len:u32  request_id:u64  client_id:u64                    ; 32 bytes
//   frame  := header payload[payload_len]
//
// magic is 0x314D4452 ("RDM1" on the wire), version 1, reserved 0. flags bit 0 marks a response;
// bit 1 marks an EXECUTE from another member of the cluster (kFlagPeer); bit 2 one that applies
// the caller's replicated write (kFlagReplica); bit 3 a read a replica may answer (kFlagStaleRead).

namespace ardma::wire {

bool IsKnownOp(uint8_t op) { return op >= 1 && op < kNumOps; }

const char* OpName(Op op) {
  switch (op) {
    case Op::kPing:
      return "PING";
    case Op::kRead:
      return "READ";
    case Op::kWrite:
      return "WRITE";
    case Op::kCas:
      return "CAS";
    case Op::kFetchAdd:
      return "FETCH_ADD";
    case Op::kLoad:
      return "LOAD";
    case Op::kHasCode:
      return "HAS_CODE";
    case Op::kExecute:
      return "EXECUTE";
    case Op::kStats:
      return "STATS";
    case Op::kHello:
      return "HELLO";
    case Op::kAuth:
      return "AUTH";
    case Op::kUcxConnect:
      return "UCX_CONNECT";
    case Op::kRegister:
      return "REGISTER";
    case Op::kDeregister:
      return "DEREGISTER";
    case Op::kRegionInfo:
      return "REGION_INFO";
  }
  return "UNKNOWN";
}

void EncodeHeader(const FrameHeader& h, char* out) {
  // Field by field at fixed offsets; no allocation (this runs for every frame).
  auto put = [out](size_t offset, auto value) { std::memcpy(out + offset, &value, sizeof(value)); };
  put(0, kMagic);
  put(4, kVersion);
  put(5, static_cast<uint8_t>(h.op));
  put(6, h.flags);
  put(8, h.status);
  put(10, uint16_t{0});
  put(12, h.payload_len);
  put(16, h.request_id);
  put(24, h.client_id);
}

absl::StatusOr<FrameHeader> DecodeHeader(std::string_view bytes, const WireLimits& limits) {
  if (bytes.size() < kHeaderSize) return absl::InvalidArgumentError("truncated frame header");
  ByteReader r(bytes.substr(0, kHeaderSize));
  uint32_t magic;
  uint8_t version, op;
  uint16_t reserved;
  FrameHeader h;
  r.U32(&magic);
  r.U8(&version);
  r.U8(&op);
  r.U16(&h.flags);
  r.U16(&h.status);
  r.U16(&reserved);
  r.U32(&h.payload_len);
  r.U64(&h.request_id);
  r.U64(&h.client_id);
  if (magic != kMagic) return absl::InvalidArgumentError("bad frame magic");
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported protocol version ", version));
  }
  if (h.payload_len > limits.max_payload_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("frame payload of ", h.payload_len,
                                                     " bytes exceeds the limit of ",
                                                     limits.max_payload_bytes));
  }
  h.op = static_cast<Op>(op);  // may be unknown: the dispatcher answers that with an error
  return h;
}

size_t BeginFrame(std::string* out) {
  size_t start = out->size();
  out->resize(start + kHeaderSize);
  return start;
}

void FinishFrame(FrameHeader header, size_t start, std::string* out) {
  header.payload_len = static_cast<uint32_t>(out->size() - start - kHeaderSize);
  EncodeHeader(header, out->data() + start);
}

std::string EncodeErrorResponse(const FrameHeader& request, const absl::Status& status) {
  std::string out;
  size_t start = BeginFrame(&out);
  out.append(StatusPayload(status));
  FrameHeader h = request;
  h.flags = kFlagResponse;
  h.status = StatusToWire(status);
  FinishFrame(h, start, &out);
  return out;
}

std::string ErrorResponseForHeader(std::string_view raw, const absl::Status& status) {
  uint32_t magic;
  if (raw.size() < kHeaderSize) return std::string();
  std::memcpy(&magic, raw.data(), 4);
  if (magic != kMagic) return std::string();
  FrameHeader h;
  std::memcpy(&h.request_id, raw.data() + 16, 8);
  std::memcpy(&h.client_id, raw.data() + 24, 8);
  h.op = static_cast<Op>(raw[5]);
  return EncodeErrorResponse(h, status);
}

uint16_t StatusToWire(absl::StatusCode code) { return static_cast<uint16_t>(code); }

uint16_t StatusToWire(const absl::Status& status) {
  return slots::RedirectOf(status) ? kWireRedirect : StatusToWire(status.code());
}

std::string StatusPayload(const absl::Status& status) {
  std::string out;
  if (std::optional<slots::Redirect> redirect = slots::RedirectOf(status)) {
    out = slots::RedirectBytes(*redirect);
  }
  absl::string_view message = status.message();
  out.append(message.data(), message.size());
  return out;
}

absl::Status StatusFromWire(uint16_t status, std::string_view message) {
  if (status == kWireRedirect) {
    std::optional<slots::Redirect> redirect = slots::RedirectFromBytes(
        message.substr(0, std::min(message.size(), slots::kRedirectBytes)));
    if (redirect) return slots::RedirectStatus(*redirect);
    return absl::DataLossError("a malformed redirect");
  }
  absl::StatusCode code = status <= static_cast<uint16_t>(absl::StatusCode::kUnauthenticated)
                              ? static_cast<absl::StatusCode>(status)
                              : absl::StatusCode::kUnknown;
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  return absl::Status(code, ToAbsl(message));
}

}  // namespace ardma::wire
