// Payload encoding and decoding for every op of the Active RDMA protocol. The grammar is at the top
// of messages.cc and in docs/PROTOCOL.md.
//
// Encoders append to a std::string (usually after BeginFrame). Decoders take a payload and the
// limits, validate every length against the payload and the limits before using it, and return
// InvalidArgument for anything malformed (truncated, trailing bytes, zero-entry batches, ...).
// Decoded values borrow from the payload (std::string_view members): keep the payload alive.
// Pure functions; safe from any thread.
#ifndef ARDMA_CORE_WIRE_MESSAGES_H_
#define ARDMA_CORE_WIRE_MESSAGES_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/wire/frame.h"

namespace ardma::wire {

using RegionId = uint32_t;
inline constexpr RegionId kHeapRegion = 0;

// What kind of code a LOAD ships.
enum class CodeKind : uint8_t { kNative = 1, kJvm = 2 };
bool IsKnownCodeKind(uint8_t kind);
const char* CodeKindName(CodeKind kind);

// SHA-256 of the shipped bytes.
using CodeHash = std::array<uint8_t, 32>;
std::string HashToHex(const CodeHash& hash);
absl::StatusOr<CodeHash> HashFromHex(std::string_view hex);

inline constexpr size_t kMaxNameLength = 1024;  // library and function names

struct ReadEntry {
  RegionId region = kHeapRegion;
  uint64_t addr = 0;
  uint32_t len = 0;
};

struct WriteEntry {
  RegionId region = kHeapRegion;
  uint64_t addr = 0;
  std::string_view data;
};

struct CasRequest {
  RegionId region = kHeapRegion;
  uint64_t addr = 0;
  uint64_t expected = 0;
  uint64_t desired = 0;
};

struct FetchAddRequest {
  RegionId region = kHeapRegion;
  uint64_t addr = 0;
  uint64_t delta = 0;
};

inline constexpr size_t kMaxLoadDeps = 64;

struct LoadRequest {
  CodeKind kind = CodeKind::kNative;
  std::string_view library_name;  // may be empty: then the code names itself
  std::string_view code;
  // The libraries this code was built against: its calls of their functions resolve to exactly
  // these versions (docs/SECURITY.md). Empty: calls resolve to the newest exporter of a name.
  std::vector<CodeHash> deps;
};

struct ExecuteRequest {
  bool by_hash = false;  // false: `function` resolves to the newest library exporting it
  CodeHash hash{};       // by_hash: the exact library version
  std::string_view function;
  uint64_t timeout_us = 0;  // 0: the server's default deadline
  std::string_view args;
};

using StatsEntry = std::pair<std::string, uint64_t>;

// PING: the payload is echoed; no encoding beyond the raw bytes.

void EncodeReadRequest(std::span<const ReadEntry> entries, std::string* out);
absl::StatusOr<std::vector<ReadEntry>> DecodeReadRequest(std::string_view payload,
                                                         const WireLimits& limits);
// The READ response payload is the requested bytes, entry after entry; its size is the sum of the
// entries' lengths. This checks that sum against the frame limit.
absl::Status CheckReadResponseSize(std::span<const ReadEntry> entries, const WireLimits& limits);
absl::Status CheckReadResponseSize(uint64_t total_bytes, const WireLimits& limits);
// INVALID_ARGUMENT for an empty READ/WRITE batch (`what`), RESOURCE_EXHAUSTED for one of more
// entries than the limit — what decoding one checks, for a batch given as values.
absl::Status CheckBatchSize(size_t count, const WireLimits& limits, const char* what);

void EncodeWriteRequest(std::span<const WriteEntry> entries, std::string* out);
absl::StatusOr<std::vector<WriteEntry>> DecodeWriteRequest(std::string_view payload,
                                                           const WireLimits& limits);

void EncodeCasRequest(const CasRequest& req, std::string* out);
absl::StatusOr<CasRequest> DecodeCasRequest(std::string_view payload);

void EncodeFetchAddRequest(const FetchAddRequest& req, std::string* out);
absl::StatusOr<FetchAddRequest> DecodeFetchAddRequest(std::string_view payload);

// CAS and FETCH_ADD respond with the word's old value.
void EncodeU64Response(uint64_t value, std::string* out);
absl::StatusOr<uint64_t> DecodeU64Response(std::string_view payload);

void EncodeLoadRequest(const LoadRequest& req, std::string* out);
absl::StatusOr<LoadRequest> DecodeLoadRequest(std::string_view payload);
// LOAD responds with the hash; HAS_CODE asks with one.
void EncodeHash(const CodeHash& hash, std::string* out);
absl::StatusOr<CodeHash> DecodeHash(std::string_view payload);

void EncodeHasCodeResponse(bool present, std::string* out);
absl::StatusOr<bool> DecodeHasCodeResponse(std::string_view payload);

void EncodeExecuteRequest(const ExecuteRequest& req, std::string* out);
absl::StatusOr<ExecuteRequest> DecodeExecuteRequest(std::string_view payload);
// The same into `*out` (the server's per-request path: no copy of the request).
absl::Status DecodeExecuteRequest(std::string_view payload, ExecuteRequest* out);
// EXECUTE responds with the function's result bytes as the whole payload.

void EncodeStatsResponse(std::span<const StatsEntry> entries, std::string* out);
absl::StatusOr<std::vector<StatsEntry>> DecodeStatsResponse(std::string_view payload,
                                                            const WireLimits& limits);

// UCX_CONNECT: the client's UCX worker address; the answer is the server's, a session number the
// client's active messages carry, and each region's remote key and bounds. The server has the
// address unpacked in a separate process first (ucx_address_check.h): UCX asserts on some
// malformed ones.
struct UcxRegionKey {
  RegionId region = 0;
  uint64_t base = 0;  // the region's first byte in the server's address space
  uint64_t size = 0;
  bool read_only = false;
  std::string rkey;  // packed by ucp_rkey_pack
};
struct UcxHello {
  uint64_t session = 0;
  std::string worker_address;
  std::vector<UcxRegionKey> regions;
  // The server's --max-inflight: the client keeps no more requests unanswered on the session
  // (0: not said, from servers before it; encoded after the regions).
  uint32_t max_inflight = 0;
};
// One region's key, as UCX_CONNECT, REGISTER and REGION_INFO carry it.
void EncodeRegionKey(const UcxRegionKey& key, std::string* out);
absl::StatusOr<UcxRegionKey> DecodeRegionKey(std::string_view payload);

// REGISTER: a file under the server's --register-dir (by path) or one of the client's memfds (by
// descriptor number; Unix-socket connections only: the server opens it through /proc/PID/fd). The
// answer is the new region's key (its rkey empty when the server has no UCX).
enum class RegisterKind : uint8_t { kFile = 1, kMemfd = 2 };
inline constexpr size_t kMaxRegisterPath = 4096;
struct RegisterRequest {
  RegisterKind kind = RegisterKind::kFile;
  bool writable = false;  // others may WRITE it (otherwise READ only)
  uint64_t size = 0;      // bytes mapped; 0: the file's size
  std::string_view path;  // kFile
  uint32_t fd = 0;        // kMemfd
};
void EncodeRegisterRequest(const RegisterRequest& req, std::string* out);
absl::StatusOr<RegisterRequest> DecodeRegisterRequest(std::string_view payload);
// DEREGISTER and REGION_INFO ask with a region id; DEREGISTER answers with nothing.
void EncodeRegionId(RegionId region, std::string* out);
absl::StatusOr<RegionId> DecodeRegionId(std::string_view payload);

// The request: the client's worker address, and whether its endpoint has peer error handling
// (a flags byte after the address, bit 0; absent from clients before it): both ends of a UCX
// connection must agree, so the server's endpoint follows the client's.
struct UcxConnectRequest {
  std::string_view worker_address;
  bool peer_error_handling = false;
};
void EncodeUcxConnectRequest(const UcxConnectRequest& request, std::string* out);
absl::StatusOr<UcxConnectRequest> DecodeUcxConnectRequest(std::string_view payload);
void EncodeUcxHello(const UcxHello& hello, std::string* out);
absl::StatusOr<UcxHello> DecodeUcxHello(std::string_view payload);

// HELLO: sent by the server as the first frame of every stream connection, a response frame with
// request id 0 that no request asked for. It says whether the connection must authenticate before
// any other op and carries the challenge for it, and the connection's lock owner (LockOwner in
// core/context/context.h: the token its lock words carry and the owner table's address; both 0
// from a server that tracks no owners, and absent from servers before the owner table), and the
// server's --idle-timeout (0: none): a client keeps its connection alive by sending something at
// least every third of it (a PING when it has nothing to say), so only a client that is gone or
// stopped is idle — and the locks its connection owns pass on only then.
inline constexpr size_t kNonceSize = 32;
using Nonce = std::array<uint8_t, kNonceSize>;
struct Hello {
  bool auth_required = false;
  Nonce nonce{};
  uint64_t owner_token = 0;
  uint64_t owner_table = 0;
  uint32_t idle_timeout_ms = 0;
};
void EncodeHello(const Hello& hello, std::string* out);
absl::StatusOr<Hello> DecodeHello(std::string_view payload);

// AUTH: who the client is, its own nonce and its proof (core/security/auth.h). The answer is the
// server's proof and what the connection may now do (security::Permission bits).
inline constexpr size_t kMaxAuthNameLength = 255;
struct AuthRequest {
  std::string_view name;
  Nonce client_nonce{};
  std::array<uint8_t, 32> proof{};
};
struct AuthResponse {
  std::array<uint8_t, 32> proof{};
  uint32_t permissions = 0;
};
void EncodeAuthRequest(const AuthRequest& req, std::string* out);
absl::StatusOr<AuthRequest> DecodeAuthRequest(std::string_view payload);
void EncodeAuthResponse(const AuthResponse& resp, std::string* out);
absl::StatusOr<AuthResponse> DecodeAuthResponse(std::string_view payload);

}  // namespace ardma::wire

#endif  // ARDMA_CORE_WIRE_MESSAGES_H_
