// The frame of the Active RDMA wire protocol: a fixed 32-byte little-endian header followed by an
// op-specific payload (see core/wire/messages.h for the payloads and docs/PROTOCOL.md for the whole
// grammar). Pure functions and value types; no I/O, no Asio, safe to call from any thread.
//
//   std::string frame;
//   size_t start = BeginFrame(&frame);
//   EncodePingRequest("hello", &frame);
//   FinishFrame({.op = Op::kPing, .request_id = 7, .client_id = 1}, start, &frame);
//
//   absl::StatusOr<FrameHeader> h = DecodeHeader(bytes, limits);   // validates
//   magic/version/op/length
#ifndef ARDMA_CORE_WIRE_FRAME_H_
#define ARDMA_CORE_WIRE_FRAME_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ardma::wire {

inline constexpr uint32_t kMagic = 0x314D4452;  // "RDM1" read as little-endian bytes
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 32;
inline constexpr uint16_t kDefaultPort = 15712;

enum class Op : uint8_t {
  kPing = 1,
  kRead = 2,
  kWrite = 3,
  kCas = 4,
  kFetchAdd = 5,
  kLoad = 6,
  kHasCode = 7,
  kExecute = 8,
  kStats = 9,
  kUcxConnect = 10,  // bootstraps a UCX session over this connection (messages.h)
  kHello = 11,       // the server's first frame on every connection, unasked (messages.h)
  kAuth = 12,        // the client's answer to HELLO's challenge (core/security/auth.h)
  kRegister = 13,    // maps a file or memfd as a new region owned by this connection
  kDeregister = 14,  // removes a region this connection registered
  kRegionInfo = 15,  // a region's bounds (and its UCX key) by id
};
inline constexpr int kNumOps = 16;  // op values are < kNumOps
bool IsKnownOp(uint8_t op);
const char* OpName(Op op);

// Header flag bits.
inline constexpr uint16_t kFlagResponse = 1u << 0;
// On an EXECUTE: the caller is another member of the server's cluster (a server-to-server call);
// the connection must hold the `peer` permission.
inline constexpr uint16_t kFlagPeer = 1u << 1;
// On a peer's EXECUTE: its primary's replicated write, applied here as the slot's replica; the
// arguments start with the write's order (slot, the primary's incarnation and sequence number).
inline constexpr uint16_t kFlagReplica = 1u << 2;
// On an EXECUTE: the caller accepts a replica's answer to a read (a stale read).
inline constexpr uint16_t kFlagStaleRead = 1u << 3;

struct FrameHeader {
  Op op = Op::kPing;
  uint16_t flags = 0;
  // In responses: an absl::StatusCode value; the payload of a non-OK response is the message.
  uint16_t status = 0;
  uint32_t payload_len = 0;
  // Chosen by the client; echoed in the response. Responses may arrive in any order.
  uint64_t request_id = 0;
  // A client's random, stable identity; with request_id it names a request for de-duplication.
  uint64_t client_id = 0;

  bool is_response() const { return (flags & kFlagResponse) != 0; }
};

// Explicit, configurable limits. Everything that sizes a buffer from the wire is checked
// against these first.
struct WireLimits {
  uint32_t max_payload_bytes = 64u << 20;       // one frame's payload
  uint32_t max_batch_entries = 65536;           // READ / WRITE entries per frame
  uint32_t max_inflight_per_connection = 1024;  // server stops reading a connection beyond this
  // Answers queued for a connection, not yet taken by its socket: past this the server stops
  // reading that connection, so a client that sends requests but never reads the answers cannot
  // grow the server's memory (it holds at most this plus one answer).
  uint64_t max_queued_bytes_per_connection = 64ull << 20;
  // The same over every connection: past it, connections with answers queued stop being read
  // until the total drops (those with none are still read), so many clients that never read
  // cannot hold max_queued_bytes_per_connection each.
  uint64_t max_queued_bytes_total = 256ull << 20;
  // A frame begun must arrive whole within this many milliseconds of the server's reading (time
  // it spends not reading, under back-pressure, does not count), or the connection is closed: a
  // client that sends part of a frame and stalls cannot hold the buffer for it. 0: no limit.
  uint32_t frame_timeout_ms = 30000;
  // A connection that sends nothing for this many milliseconds while it has no request
  // unanswered (a parked one counts) is closed. 0: never (the default, as Redis's `timeout 0`: a
  // connection's close hooks release what it holds, so closing it is not free).
  uint32_t idle_timeout_ms = 0;
};

// Serialises `header` into exactly kHeaderSize bytes at `out`.
void EncodeHeader(const FrameHeader& header, char* out);

// Parses and validates a header: magic, version, payload within limits. The op is not checked
// here (an unknown op still has a well-formed frame and gets an error response); see IsKnownOp.
// Errors: InvalidArgument (bad magic/version), ResourceExhausted (payload too large).
absl::StatusOr<FrameHeader> DecodeHeader(std::string_view bytes, const WireLimits& limits);

// Frame building in place: BeginFrame reserves the header at the end of *out and returns its
// offset; append the payload; FinishFrame fills the header in (payload_len is computed).
size_t BeginFrame(std::string* out);
void FinishFrame(FrameHeader header, size_t start, std::string* out);

// A complete error response for the given request.
std::string EncodeErrorResponse(const FrameHeader& request, const absl::Status& status);
// The error response for a frame whose header (`raw`, its first kHeaderSize bytes) did not pass
// DecodeHeader, if it still names a request (the magic is right); empty otherwise. The server
// answers such a frame with it and then closes the connection, over every transport.
std::string ErrorResponseForHeader(std::string_view raw, const absl::Status& status);

// Status <-> wire. The wire carries absl::StatusCode values (unknown ones decode as kUnknown) and
// the message as the payload; a redirect (slots::RedirectOf: the key's slot is served elsewhere)
// travels as kWireRedirect with the redirect's bytes (slots::RedirectBytes) before the message, so
// that every service's client can follow it.
inline constexpr uint16_t kWireRedirect = 100;
uint16_t StatusToWire(absl::StatusCode code);
uint16_t StatusToWire(const absl::Status& status);
std::string StatusPayload(const absl::Status& status);
absl::Status StatusFromWire(uint16_t status, std::string_view payload);

}  // namespace ardma::wire

#endif  // ARDMA_CORE_WIRE_FRAME_H_
