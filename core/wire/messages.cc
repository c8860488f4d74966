#include "core/wire/messages.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

// Payload grammar (integers little-endian; str16 := len:u16 bytes[len]; bytes32 := len:u32
// bytes[len]; rest := every byte to the end of the payload). A request payload must be consumed
// exactly: trailing bytes are an error.
//
//   PING       request  := rest                                  response := the same bytes
//   READ       request  := count:u32 (region:u32 addr:u64 len:u32){count}       1 <= count
//              response := the bytes of entry 1, then entry 2, ...  (sum of the lens)
//   WRITE      request  := count:u32 (region:u32 addr:u64 data:bytes32){count}  1 <= count
//              response := empty
//   CAS        request  := region:u32 addr:u64 expected:u64 desired:u64  response := old:u64
//   FETCH_ADD  request  := region:u32 addr:u64 delta:u64                 response := old:u64
//   LOAD       request  := kind:u8 library:str16 code:bytes32 [count:u8 dep_hash:u8[32]{count}]
//              response := hash:u8[32]   (deps: the libraries the code was built against, 1..64)
//   HAS_CODE   request  := hash:u8[32]                                   response := present:u8
//   EXECUTE    request  := target:u8 [hash:u8[32] if target=1] function:str16 timeout_us:u64
//                          args:rest
//              response := result:rest
//   STATS      request  := empty
//              response := count:u32 (name:str16 value:u64){count}
//   UCX_CONNECT request := worker_address:bytes32
//              response := session:u64 worker_address:bytes32 count:u32
//                          (region:u32 base:u64 size:u64 read_only:u8 rkey:bytes32){count}
//
//   HELLO      (server to client, unasked, request id 0)
//              response := flags:u8 (bit 0: authentication required) nonce:u8[32]
//   AUTH       request  := name:u8-length-prefixed (1..255 bytes) client_nonce:u8[32] proof:u8[32]
//              response := proof:u8[32] permissions:u32
//
//   Any response whose header status is not 0 (OK) := message:rest (UTF-8 text)
//
// kind: 1 native shared object, 2 jvm class/jar. target: 0 by function name (resolved to the newest
// library that exports it), 1 by library hash + function name. Batches are validated whole before
// any entry is applied: a READ or WRITE with one bad entry fails without side effects.

namespace ardma::wire {
namespace {

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", what));
}

absl::Status CheckBatchCount(uint32_t count, size_t min_entry_bytes, const ByteReader& r,
                             const WireLimits& limits, const char* what) {
  ARDMA_RETURN_IF_ERROR(CheckBatchSize(count, limits, what));
  // Every entry needs at least min_entry_bytes: reject counts the payload cannot hold before
  // reserving anything.
  if (count > r.remaining() / min_entry_bytes) return Malformed(what);
  return absl::OkStatus();
}

}  // namespace

bool IsKnownCodeKind(uint8_t kind) { return kind == 1 || kind == 2; }

const char* CodeKindName(CodeKind kind) {
  switch (kind) {
    case CodeKind::kNative:
      return "native";
    case CodeKind::kJvm:
      return "jvm";
  }
  return "unknown";
}

std::string HashToHex(const CodeHash& hash) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t b : hash) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

absl::StatusOr<CodeHash> HashFromHex(std::string_view hex) {
  if (hex.size() != 64) return absl::InvalidArgumentError("a code hash is 64 hex digits");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  CodeHash hash;
  for (size_t i = 0; i < 32; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("a code hash is 64 hex digits");
    hash[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return hash;
}

void EncodeReadRequest(std::span<const ReadEntry> entries, std::string* out) {
  ByteWriter w(out);
  w.U32(static_cast<uint32_t>(entries.size()));
  for (const ReadEntry& e : entries) {
    w.U32(e.region);
    w.U64(e.addr);
    w.U32(e.len);
  }
}

absl::StatusOr<std::vector<ReadEntry>> DecodeReadRequest(std::string_view payload,
                                                         const WireLimits& limits) {
  ByteReader r(payload);
  uint32_t count;
  if (!r.U32(&count)) return Malformed("READ");
  if (absl::Status s = CheckBatchCount(count, 16, r, limits, "READ"); !s.ok()) return s;
  std::vector<ReadEntry> entries(count);
  for (ReadEntry& e : entries) {
    r.U32(&e.region);
    r.U64(&e.addr);
    r.U32(&e.len);
  }
  if (!r.AtEnd()) return Malformed("READ");
  if (absl::Status s = CheckReadResponseSize(entries, limits); !s.ok()) return s;
  return entries;
}

absl::Status CheckBatchSize(size_t count, const WireLimits& limits, const char* what) {
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat("empty ", what, " batch"));
  if (count > limits.max_batch_entries) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " batch of ", count, " entries exceeds the limit of ", limits.max_batch_entries));
  }
  return absl::OkStatus();
}

absl::Status CheckReadResponseSize(std::span<const ReadEntry> entries, const WireLimits& limits) {
  uint64_t total = 0;
  for (const ReadEntry& e : entries) total += e.len;
  return CheckReadResponseSize(total, limits);
}

absl::Status CheckReadResponseSize(uint64_t total, const WireLimits& limits) {
  if (total > limits.max_payload_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "READ batch of ", total, " bytes exceeds the frame limit of ", limits.max_payload_bytes));
  }
  return absl::OkStatus();
}

void EncodeWriteRequest(std::span<const WriteEntry> entries, std::string* out) {
  ByteWriter w(out);
  w.U32(static_cast<uint32_t>(entries.size()));
  for (const WriteEntry& e : entries) {
    w.U32(e.region);
    w.U64(e.addr);
    w.Bytes32(e.data);
  }
}

absl::StatusOr<std::vector<WriteEntry>> DecodeWriteRequest(std::string_view payload,
                                                           const WireLimits& limits) {
  ByteReader r(payload);
  uint32_t count;
  if (!r.U32(&count)) return Malformed("WRITE");
  if (absl::Status s = CheckBatchCount(count, 16, r, limits, "WRITE"); !s.ok()) return s;
  std::vector<WriteEntry> entries(count);
  for (WriteEntry& e : entries) {
    r.U32(&e.region);
    r.U64(&e.addr);
    r.Bytes32(&e.data);
  }
  if (!r.AtEnd()) return Malformed("WRITE");
  return entries;
}

void EncodeCasRequest(const CasRequest& req, std::string* out) {
  ByteWriter w(out);
  w.U32(req.region);
  w.U64(req.addr);
  w.U64(req.expected);
  w.U64(req.desired);
}

absl::StatusOr<CasRequest> DecodeCasRequest(std::string_view payload) {
  ByteReader r(payload);
  CasRequest req;
  r.U32(&req.region);
  r.U64(&req.addr);
  r.U64(&req.expected);
  r.U64(&req.desired);
  if (!r.AtEnd()) return Malformed("CAS");
  return req;
}

void EncodeFetchAddRequest(const FetchAddRequest& req, std::string* out) {
  ByteWriter w(out);
  w.U32(req.region);
  w.U64(req.addr);
  w.U64(req.delta);
}

absl::StatusOr<FetchAddRequest> DecodeFetchAddRequest(std::string_view payload) {
  ByteReader r(payload);
  FetchAddRequest req;
  r.U32(&req.region);
  r.U64(&req.addr);
  r.U64(&req.delta);
  if (!r.AtEnd()) return Malformed("FETCH_ADD");
  return req;
}

void EncodeU64Response(uint64_t value, std::string* out) { ByteWriter(out).U64(value); }

absl::StatusOr<uint64_t> DecodeU64Response(std::string_view payload) {
  ByteReader r(payload);
  uint64_t v;
  r.U64(&v);
  if (!r.AtEnd()) return Malformed("u64 response");
  return v;
}

void EncodeLoadRequest(const LoadRequest& req, std::string* out) {
  ByteWriter w(out);
  w.U8(static_cast<uint8_t>(req.kind));
  w.Str16(req.library_name);
  w.Bytes32(req.code);
  if (req.deps.empty()) return;  // the field is optional: older clients send none
  w.U8(static_cast<uint8_t>(req.deps.size()));
  for (const CodeHash& h : req.deps) {
    w.Bytes(std::string_view(reinterpret_cast<const char*>(h.data()), h.size()));
  }
}

absl::StatusOr<LoadRequest> DecodeLoadRequest(std::string_view payload) {
  ByteReader r(payload);
  uint8_t kind;
  LoadRequest req;
  r.U8(&kind);
  r.Str16(&req.library_name);
  r.Bytes32(&req.code);
  if (r.ok() && !r.AtEnd()) {
    uint8_t count = 0;
    r.U8(&count);
    if (count == 0 || count > kMaxLoadDeps) return Malformed("LOAD dependencies");
    for (uint8_t i = 0; i < count; ++i) {
      std::string_view h;
      if (!r.Bytes(32, &h)) return Malformed("LOAD dependencies");
      CodeHash hash;
      std::memcpy(hash.data(), h.data(), 32);
      req.deps.push_back(hash);
    }
  }
  if (!r.AtEnd()) return Malformed("LOAD");
  if (!IsKnownCodeKind(kind)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown code kind ", kind));
  }
  if (req.library_name.size() > kMaxNameLength) return Malformed("LOAD library name");
  if (req.code.empty()) return absl::InvalidArgumentError("LOAD of empty code");
  req.kind = static_cast<CodeKind>(kind);
  return req;
}

void EncodeHash(const CodeHash& hash, std::string* out) {
  out->append(reinterpret_cast<const char*>(hash.data()), hash.size());
}

absl::StatusOr<CodeHash> DecodeHash(std::string_view payload) {
  if (payload.size() != 32) return Malformed("code hash");
  CodeHash hash;
  std::memcpy(hash.data(), payload.data(), 32);
  return hash;
}

void EncodeHasCodeResponse(bool present, std::string* out) { ByteWriter(out).U8(present ? 1 : 0); }

absl::StatusOr<bool> DecodeHasCodeResponse(std::string_view payload) {
  if (payload.size() != 1 || static_cast<uint8_t>(payload[0]) > 1) {
    return Malformed("HAS_CODE response");
  }
  return payload[0] == 1;
}

void EncodeExecuteRequest(const ExecuteRequest& req, std::string* out) {
  ByteWriter w(out);
  w.U8(req.by_hash ? 1 : 0);
  if (req.by_hash) EncodeHash(req.hash, out);
  w.Str16(req.function);
  w.U64(req.timeout_us);
  w.Bytes(req.args);
}

absl::StatusOr<ExecuteRequest> DecodeExecuteRequest(std::string_view payload) {
  ExecuteRequest req;
  ARDMA_RETURN_IF_ERROR(DecodeExecuteRequest(payload, &req));
  return req;
}

absl::Status DecodeExecuteRequest(std::string_view payload, ExecuteRequest* out) {
  ByteReader r(payload);
  ExecuteRequest& req = *out;
  uint8_t target;
  if (!r.U8(&target) || target > 1) return Malformed("EXECUTE target");
  req.by_hash = target == 1;
  if (req.by_hash) {
    std::string_view hash;
    r.Bytes(32, &hash);
    if (r.ok()) std::memcpy(req.hash.data(), hash.data(), 32);
  }
  r.Str16(&req.function);
  r.U64(&req.timeout_us);
  if (!r.ok()) return Malformed("EXECUTE");
  if (req.function.empty() || req.function.size() > kMaxNameLength) {
    return absl::InvalidArgumentError("EXECUTE needs a function name");
  }
  req.args = r.Rest();
  return absl::OkStatus();
}

void EncodeStatsResponse(std::span<const StatsEntry> entries, std::string* out) {
  ByteWriter w(out);
  w.U32(static_cast<uint32_t>(entries.size()));
  for (const auto& [name, value] : entries) {
    w.Str16(name);
    w.U64(value);
  }
}

absl::StatusOr<std::vector<StatsEntry>> DecodeStatsResponse(std::string_view payload,
                                                            const WireLimits& limits) {
  ByteReader r(payload);
  uint32_t count;
  if (!r.U32(&count)) return Malformed("STATS");
  if (count > r.remaining() / 10) return Malformed("STATS");
  std::vector<StatsEntry> entries;
  entries.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view name;
    uint64_t value;
    r.Str16(&name);
    r.U64(&value);
    if (!r.ok()) return Malformed("STATS");
    entries.emplace_back(std::string(name), value);
  }
  if (!r.AtEnd()) return Malformed("STATS");
  return entries;
}

void EncodeUcxConnectRequest(const UcxConnectRequest& request, std::string* out) {
  ByteWriter w(out);
  w.Bytes32(request.worker_address);
  w.U8(request.peer_error_handling ? 1 : 0);
}

absl::StatusOr<UcxConnectRequest> DecodeUcxConnectRequest(std::string_view payload) {
  ByteReader r(payload);
  UcxConnectRequest request;
  uint8_t flags = 0;
  if (!r.Bytes32(&request.worker_address) || request.worker_address.empty()) {
    return Malformed("UCX_CONNECT");
  }
  if (!r.AtEnd() && (!r.U8(&flags) || flags > 1)) return Malformed("UCX_CONNECT");
  if (!r.AtEnd()) return Malformed("UCX_CONNECT");
  request.peer_error_handling = (flags & 1) != 0;
  return request;
}

namespace {

void PutRegionKey(ByteWriter& w, const UcxRegionKey& k) {
  w.U32(k.region);
  w.U64(k.base);
  w.U64(k.size);
  w.U8(k.read_only ? 1 : 0);
  w.Bytes32(k.rkey);
}

bool GetRegionKey(ByteReader& r, UcxRegionKey* k) {
  uint8_t read_only;
  std::string_view rkey;
  if (!r.U32(&k->region) || !r.U64(&k->base) || !r.U64(&k->size) || !r.U8(&read_only) ||
      !r.Bytes32(&rkey)) {
    return false;
  }
  k->read_only = read_only != 0;
  k->rkey = std::string(rkey);
  return true;
}

}  // namespace

void EncodeUcxHello(const UcxHello& hello, std::string* out) {
  ByteWriter w(out);
  w.U64(hello.session);
  w.Bytes32(hello.worker_address);
  w.U32(static_cast<uint32_t>(hello.regions.size()));
  for (const UcxRegionKey& k : hello.regions) PutRegionKey(w, k);
  w.U32(hello.max_inflight);
}

absl::StatusOr<UcxHello> DecodeUcxHello(std::string_view payload) {
  ByteReader r(payload);
  UcxHello hello;
  std::string_view address;
  uint32_t count;
  if (!r.U64(&hello.session) || !r.Bytes32(&address) || !r.U32(&count) ||
      count > r.remaining() / 25) {  // an entry is at least 25 bytes (an empty key: no access)
    return Malformed("UCX_CONNECT response");
  }
  hello.worker_address = std::string(address);
  for (uint32_t i = 0; i < count; ++i) {
    UcxRegionKey k;
    if (!GetRegionKey(r, &k)) return Malformed("UCX_CONNECT response");
    hello.regions.push_back(std::move(k));
  }
  if (!r.AtEnd() && !r.U32(&hello.max_inflight)) return Malformed("UCX_CONNECT response");
  if (!r.AtEnd()) return Malformed("UCX_CONNECT response");
  return hello;
}

void EncodeRegionKey(const UcxRegionKey& key, std::string* out) {
  ByteWriter w(out);
  PutRegionKey(w, key);
}

absl::StatusOr<UcxRegionKey> DecodeRegionKey(std::string_view payload) {
  ByteReader r(payload);
  UcxRegionKey k;
  if (!GetRegionKey(r, &k) || !r.AtEnd()) return Malformed("region key");
  return k;
}

void EncodeRegisterRequest(const RegisterRequest& req, std::string* out) {
  ByteWriter w(out);
  w.U8(static_cast<uint8_t>(req.kind));
  w.U8(req.writable ? 1 : 0);
  w.U64(req.size);
  if (req.kind == RegisterKind::kMemfd) {
    w.U32(req.fd);
  } else {
    w.Str16(req.path);
  }
}

absl::StatusOr<RegisterRequest> DecodeRegisterRequest(std::string_view payload) {
  ByteReader r(payload);
  RegisterRequest req;
  uint8_t kind, writable;
  if (!r.U8(&kind) || !r.U8(&writable) || writable > 1 || !r.U64(&req.size)) {
    return Malformed("REGISTER request");
  }
  req.writable = writable != 0;
  if (kind == static_cast<uint8_t>(RegisterKind::kFile)) {
    req.kind = RegisterKind::kFile;
    if (!r.Str16(&req.path) || req.path.empty() || req.path.size() > kMaxRegisterPath ||
        req.path.find('\0') != std::string_view::npos) {
      return Malformed("REGISTER request (path)");
    }
  } else if (kind == static_cast<uint8_t>(RegisterKind::kMemfd)) {
    req.kind = RegisterKind::kMemfd;
    if (!r.U32(&req.fd)) return Malformed("REGISTER request (descriptor)");
  } else {
    return absl::InvalidArgumentError(absl::StrCat("REGISTER: unknown kind ", kind));
  }
  if (!r.AtEnd()) return Malformed("REGISTER request");
  return req;
}

void EncodeRegionId(RegionId region, std::string* out) { ByteWriter(out).U32(region); }

absl::StatusOr<RegionId> DecodeRegionId(std::string_view payload) {
  ByteReader r(payload);
  RegionId region;
  if (!r.U32(&region) || !r.AtEnd()) return Malformed("region id");
  return region;
}

namespace {

template <size_t N>
void PutArray(ByteWriter& w, const std::array<uint8_t, N>& a) {
  w.Bytes(std::string_view(reinterpret_cast<const char*>(a.data()), N));
}

template <size_t N>
bool GetArray(ByteReader& r, std::array<uint8_t, N>* a) {
  std::string_view bytes;
  if (!r.Bytes(N, &bytes)) return false;
  std::memcpy(a->data(), bytes.data(), N);
  return true;
}

}  // namespace

void EncodeHello(const Hello& hello, std::string* out) {
  ByteWriter w(out);
  w.U8(hello.auth_required ? 1 : 0);
  PutArray(w, hello.nonce);
  w.U64(hello.owner_token);
  w.U64(hello.owner_table);
  w.U32(hello.idle_timeout_ms);
}

absl::StatusOr<Hello> DecodeHello(std::string_view payload) {
  ByteReader r(payload);
  Hello hello;
  uint8_t flags;
  if (!r.U8(&flags) || !GetArray(r, &hello.nonce)) return Malformed("HELLO");
  // Later fields are absent from older servers.
  if (!r.AtEnd() && (!r.U64(&hello.owner_token) || !r.U64(&hello.owner_table))) {
    return Malformed("HELLO");
  }
  if (!r.AtEnd() && (!r.U32(&hello.idle_timeout_ms) || !r.AtEnd())) return Malformed("HELLO");
  hello.auth_required = (flags & 1) != 0;
  return hello;
}

void EncodeAuthRequest(const AuthRequest& req, std::string* out) {
  ByteWriter w(out);
  w.U8(static_cast<uint8_t>(req.name.size()));
  w.Bytes(req.name);
  PutArray(w, req.client_nonce);
  PutArray(w, req.proof);
}

absl::StatusOr<AuthRequest> DecodeAuthRequest(std::string_view payload) {
  ByteReader r(payload);
  AuthRequest req;
  uint8_t len;
  if (!r.U8(&len) || len == 0 || !r.Bytes(len, &req.name) || !GetArray(r, &req.client_nonce) ||
      !GetArray(r, &req.proof) || !r.AtEnd()) {
    return Malformed("AUTH");
  }
  return req;
}

void EncodeAuthResponse(const AuthResponse& resp, std::string* out) {
  ByteWriter w(out);
  PutArray(w, resp.proof);
  w.U32(resp.permissions);
}

absl::StatusOr<AuthResponse> DecodeAuthResponse(std::string_view payload) {
  ByteReader r(payload);
  AuthResponse resp;
  if (!GetArray(r, &resp.proof) || !r.U32(&resp.permissions) || !r.AtEnd()) {
    return Malformed("AUTH response");
  }
  return resp;
}

}  // namespace ardma::wire
