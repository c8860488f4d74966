#include "services/dht/dht_format.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/root_cache.h"
#include "services/service_name.h"

namespace ardma::dht {

using wire::ByteReader;
using wire::ByteWriter;

absl::Status CheckName(std::string_view name) {
  return CheckServiceName(name, kMaxNameBytes, "table");
}

void EncodeTarget(const Target& target, std::string* out) {
  ByteWriter w(out);
  if (target.header != 0) {
    w.U8(target.fence != 0 ? 2 : 1);
    w.U64(target.header);
    w.U64(target.id);
    w.U64(target.geometry);
    if (target.fence != 0) {
      w.U64(target.fence);
      w.U32(target.slot);
    }
  } else {
    w.U8(target.unfenced ? 3 : 0);
    w.Str16(target.name.substr(0, 0xffff));
  }
}

std::string EncodeKeyArgs(std::string_view key) {
  std::string out;
  ByteWriter(&out).Bytes32(key);
  return out;
}

std::string EncodePutArgs(std::string_view key, std::string_view value) {
  std::string out;
  out.reserve(8 + key.size() + value.size());
  ByteWriter w(&out);
  w.Bytes32(key);
  w.Bytes32(value);
  return out;
}

absl::StatusOr<Reply> DecodeReply(std::string_view bytes, ReplyKind kind) {
  ByteReader r(bytes);
  Reply reply;
  bool ok = r.U64(&reply.geometry);
  if (ok && reply.geometry == kRedirectGeometry) {
    reply.redirect = slots::RedirectFromBytes(bytes.substr(8));
    if (!reply.redirect) return absl::DataLossError("malformed dht redirect");
    return reply;
  }
  if (ok && reply.geometry == kStaleGeometry) {
    std::string_view message;
    if (!r.Bytes32(&message)) return absl::DataLossError("malformed dht stale answer");
    return StaleRootError(absl::FailedPreconditionError(ToAbsl(message)));
  }
  if (kind == ReplyKind::kCount) {
    ok = ok && r.U64(&reply.count);
  } else if (kind == ReplyKind::kScan) {
    uint32_t n = 0;
    ok = ok && r.U64(&reply.next) && r.U32(&n);
    for (uint32_t i = 0; ok && i < n; ++i) {
      std::string_view key, value;
      ok = r.Bytes32(&key) && r.Bytes32(&value);
      if (ok) reply.items.emplace_back(key, value);
    }
  } else {
    uint8_t flag = 0;
    ok = ok && r.U8(&flag);
    reply.flag = flag != 0;
    if (ok && kind == ReplyKind::kFlagAndValue && reply.flag) {
      std::string_view value;
      ok = r.Bytes32(&value);
      reply.value = std::string(value);
    }
  }
  if (!ok || !r.AtEnd()) return absl::DataLossError("malformed dht reply");
  return reply;
}

std::string EncodeStale(const absl::Status& status) {
  std::string out;
  ByteWriter w(&out);
  w.U64(kStaleGeometry);
  w.Bytes32(std::string_view(status.message().data(), status.message().size()));
  return out;
}

std::string EncodeRedirect(const slots::Redirect& redirect) {
  std::string out;
  ByteWriter(&out).U64(kRedirectGeometry);
  return out + slots::RedirectBytes(redirect);
}

}  // namespace ardma::dht
