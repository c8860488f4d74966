#include "services/list/list_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/wire/byte_io.h"
#include "services/service_name.h"

namespace ardma::list {

using wire::ByteReader;
using wire::ByteWriter;

absl::Status CheckName(std::string_view name) {
  return CheckServiceName(name, kMaxNameBytes, "list");
}

void EncodeTarget(const Target& target, std::string* out) {
  ByteWriter w(out);
  if (target.header != 0) {
    w.U8(1);
    w.U64(target.header);
  } else {
    w.U8(0);
    w.Str16(target.name.substr(0, 0xffff));
  }
}

void EncodeValue(const ListValue& value, std::string* out) {
  ByteWriter w(out);
  if (const int64_t* i = std::get_if<int64_t>(&value)) {
    w.U8(kTypeInt64);
    w.U32(8);
    w.U64(static_cast<uint64_t>(*i));
  } else {
    w.U8(kTypeBytes);
    w.Bytes32(std::get<std::string>(value));
  }
}

std::string EncodeScanRest(const ScanCursor& cursor, uint32_t max_items, uint32_t max_bytes) {
  std::string out;
  ByteWriter w(&out);
  w.U64(cursor.link);
  w.U64(cursor.index);
  w.U8(cursor.done ? 1 : 0);
  w.U32(max_items);
  w.U32(max_bytes);
  return out;
}

namespace {

bool ReadValue(ByteReader& r, ListValue* value) {
  uint8_t type;
  std::string_view bytes;
  if (!r.U8(&type) || !r.Bytes32(&bytes)) return false;
  if (type == kTypeInt64 && bytes.size() == 8) {
    uint64_t v;
    std::memcpy(&v, bytes.data(), 8);
    *value = static_cast<int64_t>(v);
    return true;
  }
  if (type == kTypeBytes) {
    *value = std::string(bytes);
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ListValue> DecodeValueResult(std::string_view bytes) {
  ByteReader r(bytes);
  ListValue value;
  if (!ReadValue(r, &value) || !r.AtEnd()) return absl::DataLossError("malformed list value");
  return value;
}

absl::StatusOr<ScanPage> DecodeScanResult(std::string_view bytes) {
  ByteReader r(bytes);
  uint32_t n;
  ScanPage page;
  if (!r.U32(&n) || n > r.remaining() / 5) return absl::DataLossError("malformed list page");
  page.values.resize(n);
  for (auto& v : page.values) {
    if (!ReadValue(r, &v)) return absl::DataLossError("malformed list page");
  }
  uint8_t done;
  if (!r.U64(&page.next.link) || !r.U64(&page.next.index) || !r.U8(&done) || !r.AtEnd()) {
    return absl::DataLossError("malformed list page");
  }
  page.next.done = done != 0;
  return page;
}

}  // namespace ardma::list
