#include "core/server/isolation_channel.h"

#include <cstring>

#include "core/net/socket_connect.h"
#include "core/wire/byte_io.h"
#include "core/wire/frame.h"

namespace ardma {

bool SendMessage(int fd, Type type, std::string_view payload) {
  std::string head(5, '\0');
  uint32_t len = static_cast<uint32_t>(payload.size() + 1);
  std::memcpy(head.data(), &len, 4);
  head[4] = static_cast<char>(type);
  return SendAll(fd, head).ok() && SendAll(fd, payload).ok();
}

bool ReceiveMessage(int fd, Type* type, std::string* payload) {
  char head[5];
  if (!RecvExactly(fd, head, sizeof head).ok()) return false;
  uint32_t len;
  std::memcpy(&len, head, 4);
  if (len == 0 || len - 1 > kMaxMessage) return false;
  *type = static_cast<Type>(head[4]);
  payload->resize(len - 1);
  return RecvExactly(fd, payload->data(), payload->size()).ok();
}

std::string ReplyPayload(const absl::Status& status, std::string_view ok_payload) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U16(wire::StatusToWire(status));
  w.Bytes(status.ok() ? std::string(ok_payload) : wire::StatusPayload(status));
  return out;
}

bool ParseReply(std::string_view reply, absl::StatusOr<std::string>* out) {
  wire::ByteReader r(reply);
  uint16_t code;
  if (!r.U16(&code)) return false;
  std::string_view rest = reply.substr(2);
  *out = code != 0 ? absl::StatusOr<std::string>(wire::StatusFromWire(code, rest))
                   : absl::StatusOr<std::string>(std::string(rest));
  return true;
}

std::string ForbiddenReportHead() {
  std::string head(5, '\0');
  uint32_t len = 5;  // type and nr
  std::memcpy(head.data(), &len, 4);
  head[4] = static_cast<char>(kForbidden);
  return head;
}

std::optional<int> ForbiddenReport(std::string_view said) {
  const std::string head = ForbiddenReportHead();
  if (said.size() < head.size() + 4) return std::nullopt;
  std::string_view last = said.substr(said.size() - head.size() - 4);
  if (last.substr(0, head.size()) != head) return std::nullopt;
  uint32_t nr;
  std::memcpy(&nr, last.data() + head.size(), 4);
  return static_cast<int>(nr);
}

int64_t UnixNanos(absl::Time t) {
  if (t == absl::InfiniteFuture()) return INT64_MAX;
  return absl::ToUnixNanos(t);
}
absl::Time FromUnixNanos(int64_t ns) {
  return ns == INT64_MAX ? absl::InfiniteFuture() : absl::FromUnixNanos(ns);
}

}  // namespace ardma
