// The "dht" active-code library: each function parses its arguments (dht_format.h), runs the
// algorithm (dht.h) and encodes the reply.
#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht.h"

namespace ardma::dht::functions {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

absl::StatusOr<Target> ParseTarget(ByteReader& r) {
  uint8_t kind;
  if (!r.U8(&kind)) return absl::InvalidArgumentError("dht: missing target");
  Target t;
  if (kind == 0) {
    if (!r.Str16(&t.name)) return absl::InvalidArgumentError("dht: malformed target");
    return t;
  }
  if (kind != 1 || !r.U64(&t.header) || !r.U64(&t.id) || !r.U64(&t.geometry) || t.header == 0) {
    return absl::InvalidArgumentError("dht: malformed target");
  }
  return t;
}

absl::StatusOr<std::string_view> ParseKey(ByteReader& r) {
  std::string_view key;
  if (!r.Bytes32(&key)) return absl::InvalidArgumentError("dht: malformed key");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dht keys are at most ", kMaxKeyBytes, " bytes, not ", key.size()));
  }
  return key;
}

// target key (value): the arguments every keyed function starts with.
struct KeyArgs {
  Target target;
  std::string_view key;
  std::string_view value;
};

absl::StatusOr<KeyArgs> ParseKeyArgs(std::string_view args, bool with_value,
                                     std::string_view trailing_error) {
  ByteReader r(args);
  KeyArgs out;
  ARDMA_ASSIGN_OR_RETURN(out.target, ParseTarget(r));
  ARDMA_ASSIGN_OR_RETURN(out.key, ParseKey(r));
  if (with_value) {
    if (!r.Bytes32(&out.value) || !r.AtEnd()) {
      return absl::InvalidArgumentError("dht.put: bad value");
    }
    if (out.value.size() > kMaxValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat("dht values are at most ", kMaxValueBytes,
                                                     " bytes, not ", out.value.size()));
    }
  } else if (!r.AtEnd()) {
    return absl::InvalidArgumentError(ToAbsl(trailing_error));
  }
  return out;
}

std::string EncodeReply(const Table& t, bool flag) {
  std::string out;
  ByteWriter w(&out);
  w.U64(t.geometry.word);
  w.U8(flag ? 1 : 0);
  return out;
}

absl::StatusOr<std::string> Open(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name) || !r.AtEnd()) return absl::InvalidArgumentError("dht.open takes a name");
  ARDMA_ASSIGN_OR_RETURN(Table t, OpenByName(ctx, name, /*create=*/true));
  std::string out;
  ByteWriter w(&out);
  w.U64(t.header);
  w.U64(t.id);
  w.U64(t.geometry.word);
  return out;
}

// get and contains.
absl::StatusOr<std::string> Read(Context& ctx, std::string_view args, bool with_value) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, false, "dht: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, a.target, /*create=*/false));
  std::string value;
  ARDMA_ASSIGN_OR_RETURN(bool found, Lookup(ctx, t, a.key, with_value ? &value : nullptr));
  std::string out = EncodeReply(t, found);
  if (found && with_value) ByteWriter(&out).Bytes32(value);
  return out;
}

absl::StatusOr<std::string> Get(Context& ctx, std::string_view args) {
  return Read(ctx, args, /*with_value=*/true);
}

absl::StatusOr<std::string> Contains(Context& ctx, std::string_view args) {
  return Read(ctx, args, /*with_value=*/false);
}

absl::StatusOr<std::string> Put(Context& ctx, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, true, ""));
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, a.target, /*create=*/true));
  ARDMA_ASSIGN_OR_RETURN(bool created, dht::Put(ctx, t, a.key, a.value));
  return EncodeReply(t, created);
}

absl::StatusOr<std::string> Insert(Context& ctx, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, true, ""));
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, a.target, /*create=*/true));
  std::string existing;
  ARDMA_ASSIGN_OR_RETURN(bool existed, dht::Insert(ctx, t, a.key, a.value, &existing));
  std::string out = EncodeReply(t, existed);
  if (existed) ByteWriter(&out).Bytes32(existing);
  return out;
}

absl::StatusOr<std::string> Remove(Context& ctx, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, false, "dht.remove: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, a.target, /*create=*/false));
  ARDMA_ASSIGN_OR_RETURN(bool removed, dht::Remove(ctx, t, a.key));
  return EncodeReply(t, removed);
}

absl::StatusOr<std::string> Size(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Target target, ParseTarget(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dht.size: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, target, /*create=*/false));
  ARDMA_ASSIGN_OR_RETURN(uint64_t count, dht::Size(ctx, t));
  std::string out;
  ByteWriter w(&out);
  w.U64(t.geometry.word);
  w.U64(count);
  return out;
}

}  // namespace
}  // namespace ardma::dht::functions

ARDMA_ACTIVE_LIBRARY(dht, {"dht.open", &ardma::dht::functions::Open},
                     {"dht.put", &ardma::dht::functions::Put},
                     {"dht.insert", &ardma::dht::functions::Insert},
                     {"dht.get", &ardma::dht::functions::Get},
                     {"dht.contains", &ardma::dht::functions::Contains},
                     {"dht.remove", &ardma::dht::functions::Remove},
                     {"dht.size", &ardma::dht::functions::Size});
