// The "list" active-code library: each function parses its arguments (list_format.h), runs the
// algorithm (list.h) and encodes the result.
#include <cstring>

#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/list/list.h"

namespace ardma::list::functions {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

absl::StatusOr<Target> ParseTarget(ByteReader& r) {
  uint8_t kind;
  Target t;
  if (!r.U8(&kind)) return absl::InvalidArgumentError("list: missing target");
  if (kind == 0 && r.Str16(&t.name)) return t;
  if (kind == 1 && r.U64(&t.header) && t.header != 0) return t;
  return absl::InvalidArgumentError("list: malformed target");
}

absl::StatusOr<ListValue> ParseValue(ByteReader& r) {
  uint8_t type;
  std::string_view bytes;
  if (!r.U8(&type) || !r.Bytes32(&bytes)) return absl::InvalidArgumentError("list: bad value");
  if (type == kTypeInt64 && bytes.size() == 8) {
    uint64_t v;
    std::memcpy(&v, bytes.data(), 8);
    return ListValue(static_cast<int64_t>(v));
  }
  if (type != kTypeBytes) return absl::InvalidArgumentError("list: bad value type");
  if (bytes.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("list values are at most ", kMaxValueBytes, " bytes, not ", bytes.size()));
  }
  return ListValue(std::string(bytes));
}

std::string EncodeResultValue(const ListValue& value) {
  std::string out;
  EncodeValue(value, &out);
  return out;
}

absl::StatusOr<std::string> Open(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name) || !r.AtEnd()) return absl::InvalidArgumentError("list.open takes a name");
  ARDMA_ASSIGN_OR_RETURN(uint64_t header, OpenByName(ctx, name, Use::kCreate));
  std::string out;
  ByteWriter(&out).U64(header);
  return out;
}

// append and prepend: target value.
absl::StatusOr<std::string> Insert(Context& ctx, std::string_view args, bool at_end) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Target target, ParseTarget(r));
  ARDMA_ASSIGN_OR_RETURN(ListValue value, ParseValue(r));
  if (!r.AtEnd()) {
    return absl::InvalidArgumentError(at_end ? "list.append: trailing bytes"
                                             : "list.prepend: trailing bytes");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t header, Resolve(ctx, target, Use::kCreate));
  ARDMA_RETURN_IF_ERROR(at_end ? list::Append(ctx, header, value)
                               : list::Prepend(ctx, header, value));
  return std::string();
}

absl::StatusOr<std::string> Append(Context& ctx, std::string_view args) {
  return Insert(ctx, args, /*at_end=*/true);
}

absl::StatusOr<std::string> Prepend(Context& ctx, std::string_view args) {
  return Insert(ctx, args, /*at_end=*/false);
}

// get and remove: target index.
absl::StatusOr<std::string> GetOrRemove(Context& ctx, std::string_view args, bool remove) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Target target, ParseTarget(r));
  uint64_t index;
  if (!r.U64(&index) || !r.AtEnd()) return absl::InvalidArgumentError("list: bad index argument");
  ARDMA_ASSIGN_OR_RETURN(uint64_t header,
                         Resolve(ctx, target, remove ? Use::kWrite : Use::kRead));
  ARDMA_ASSIGN_OR_RETURN(ListValue value,
                         remove ? list::Remove(ctx, header, index) : list::Get(ctx, header, index));
  return EncodeResultValue(value);
}

absl::StatusOr<std::string> Get(Context& ctx, std::string_view args) {
  return GetOrRemove(ctx, args, /*remove=*/false);
}

absl::StatusOr<std::string> Remove(Context& ctx, std::string_view args) {
  return GetOrRemove(ctx, args, /*remove=*/true);
}

absl::StatusOr<std::string> Size(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Target target, ParseTarget(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("list.size: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(uint64_t header, Resolve(ctx, target, Use::kRead));
  ARDMA_ASSIGN_OR_RETURN(uint64_t count, list::Size(ctx, header));
  std::string out;
  ByteWriter(&out).U64(count);
  return out;
}

absl::StatusOr<std::string> Scan(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Target target, ParseTarget(r));
  ScanCursor cursor;
  uint8_t done;
  uint32_t max_items, max_bytes;
  if (!r.U64(&cursor.link) || !r.U64(&cursor.index) || !r.U8(&done) || !r.U32(&max_items) ||
      !r.U32(&max_bytes) || !r.AtEnd()) {
    return absl::InvalidArgumentError("list.scan: bad arguments");
  }
  cursor.done = done != 0;
  if (max_items == 0) return absl::InvalidArgumentError("list.scan: max_items must be positive");
  ARDMA_ASSIGN_OR_RETURN(uint64_t header, Resolve(ctx, target, Use::kRead));
  return list::Scan(ctx, header, cursor, max_items, max_bytes);
}

}  // namespace
}  // namespace ardma::list::functions

ARDMA_ACTIVE_LIBRARY(list, {"list.open", &ardma::list::functions::Open},
                     {"list.append", &ardma::list::functions::Append},
                     {"list.prepend", &ardma::list::functions::Prepend},
                     {"list.get", &ardma::list::functions::Get},
                     {"list.remove", &ardma::list::functions::Remove},
                     {"list.size", &ardma::list::functions::Size},
                     {"list.scan", &ardma::list::functions::Scan});
