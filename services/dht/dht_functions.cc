// The "dht" active-code library: each function parses its arguments (dht_format.h), runs the
// algorithm (dht.h) and encodes the reply.
#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dht/dht.h"
#include "services/root_cache.h"

namespace ardma::dht::functions {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

absl::StatusOr<Target> ParseTarget(ByteReader& r) {
  uint8_t kind;
  if (!r.U8(&kind)) return absl::InvalidArgumentError("dht: missing target");
  Target t;
  if (kind == 0 || kind == 3) {
    if (!r.Str16(&t.name)) return absl::InvalidArgumentError("dht: malformed target");
    t.unfenced = kind == 3;
    return t;
  }
  if ((kind != 1 && kind != 2) || !r.U64(&t.header) || !r.U64(&t.id) || !r.U64(&t.geometry) ||
      t.header == 0 || (kind == 2 && (!r.U64(&t.fence) || !r.U32(&t.slot) || t.fence == 0 ||
                                      t.slot >= slots::kSlots))) {
    return absl::InvalidArgumentError("dht: malformed target");
  }
  return t;
}

// A keyed function's answer: its result, or the redirect its fence gave.
absl::StatusOr<std::string> Answer(absl::StatusOr<std::string> result) {
  if (std::optional<slots::Redirect> redirect = slots::RedirectOf(result.status())) {
    return EncodeRedirect(*redirect);
  }
  if (IsStaleRoot(result.status())) return EncodeStale(result.status());  // crosses the wire
  return result;
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
  uint8_t create = 1;
  if (!r.Str16(&name) || (!r.AtEnd() && (!r.U8(&create) || create > 1 || !r.AtEnd()))) {
    return absl::InvalidArgumentError("dht.open takes a name and an optional create flag");
  }
  ARDMA_ASSIGN_OR_RETURN(Table t, OpenByName(ctx, name, create == 1));
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> fence, heap::FindRoot(ctx, slots::kFenceRoot));
  std::string out;
  ByteWriter w(&out);
  w.U64(t.header);
  w.U64(t.id);
  w.U64(t.geometry.word);
  w.U64(fence.value_or(0));
  return out;
}

// get and contains.
absl::StatusOr<std::string> Read(Context& ctx, std::string_view args, bool with_value) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, false, "dht: trailing bytes"));
  std::string value;
  ARDMA_ASSIGN_OR_RETURN(Found found, ReadKey(ctx, a.target, a.key, with_value ? &value : nullptr));
  std::string out = EncodeReply(found.table, found.present);
  if (found.present && with_value) ByteWriter(&out).Bytes32(value);
  return out;
}

absl::StatusOr<std::string> Get(Context& ctx, std::string_view args) {
  return Answer(Read(ctx, args, /*with_value=*/true));
}

absl::StatusOr<std::string> Contains(Context& ctx, std::string_view args) {
  return Answer(Read(ctx, args, /*with_value=*/false));
}

// put and insert.
absl::StatusOr<std::string> Write(Context& ctx, std::string_view args, bool only_if_absent) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, true, ""));
  ARDMA_ASSIGN_OR_RETURN(Fence fence, FenceOf(ctx, a.target, a.key));
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, a.target, /*create=*/true));
  if (!only_if_absent) {
    ARDMA_ASSIGN_OR_RETURN(bool created, dht::Put(ctx, t, a.key, a.value, fence));
    return EncodeReply(t, created);
  }
  std::string existing;
  ARDMA_ASSIGN_OR_RETURN(bool existed, dht::Insert(ctx, t, a.key, a.value, &existing, fence));
  std::string out = EncodeReply(t, existed);
  if (existed) ByteWriter(&out).Bytes32(existing);
  return out;
}

absl::StatusOr<std::string> Put(Context& ctx, std::string_view args) {
  return Answer(Write(ctx, args, /*only_if_absent=*/false));
}

absl::StatusOr<std::string> Insert(Context& ctx, std::string_view args) {
  return Answer(Write(ctx, args, /*only_if_absent=*/true));
}

absl::StatusOr<std::string> RemoveKey(Context& ctx, std::string_view args) {
  ARDMA_ASSIGN_OR_RETURN(KeyArgs a, ParseKeyArgs(args, false, "dht.remove: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fence fence, FenceOf(ctx, a.target, a.key));
  absl::StatusOr<Table> t = Resolve(ctx, a.target, /*create=*/false);
  ARDMA_RETURN_IF_ERROR(Missing(ctx, t.status(), fence, /*write=*/true));
  ARDMA_ASSIGN_OR_RETURN(bool removed, dht::Remove(ctx, *t, a.key, fence));
  return EncodeReply(*t, removed);
}

absl::StatusOr<std::string> Remove(Context& ctx, std::string_view args) {
  return Answer(RemoveKey(ctx, args));
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

// target cursor:u64 count:u32 -> geometry:u64 next:u64 n:u32 (key:bytes32 value:bytes32)*
absl::StatusOr<std::string> ScanTable(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Target target, ParseTarget(r));
  uint64_t cursor = 0;
  uint32_t count = 0;
  if (!r.U64(&cursor) || !r.U32(&count) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dht.scan takes target cursor:u64 count:u32");
  }
  ARDMA_ASSIGN_OR_RETURN(Table t, Resolve(ctx, target, /*create=*/false));
  std::vector<Exported> found;
  ARDMA_ASSIGN_OR_RETURN(uint64_t next,
                         dht::Scan(ctx, t, cursor, std::min<uint32_t>(count, 100000), &found));
  std::string out;
  ByteWriter w(&out);
  w.U64(t.geometry.word);
  w.U64(next);
  w.U32(static_cast<uint32_t>(found.size()));
  for (const Exported& e : found) {
    w.Bytes32(e.key);
    w.Bytes32(e.value);
  }
  return out;
}

// ---- Moving slots (dht_format.h) ----

absl::StatusOr<std::string> Tables(Context& ctx, std::string_view args) {
  if (!args.empty()) return absl::InvalidArgumentError("dht.tables takes no arguments");
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> roots, heap::ListRoots(ctx, kRootPrefix));
  std::string out;
  ByteWriter w(&out);
  w.U32(static_cast<uint32_t>(roots.size()));
  for (const std::string& root : roots) w.Str16(std::string_view(root).substr(kRootPrefix.size()));
  return out;
}

// export and purge: name slots cursor geometry budget.
struct SweepArgs {
  std::string_view name, bitmap;
  uint64_t cursor = 0, geometry = 0;
  uint32_t budget = 0;
};

absl::StatusOr<SweepArgs> ParseSweepArgs(std::string_view args) {
  ByteReader r(args);
  SweepArgs a;
  if (!r.Str16(&a.name) || !r.Bytes32(&a.bitmap) || !r.U64(&a.cursor) || !r.U64(&a.geometry) ||
      !r.U32(&a.budget) || !r.AtEnd() || a.bitmap.size() != slots::kSlots / 8) {
    return absl::InvalidArgumentError(
        "dht.export/purge take name:str16 slots:bytes32 (a 2048-byte bitmap) cursor:u64 "
        "geometry:u64 budget:u32");
  }
  return a;
}

// -> next:u64 geometry:u64 then, exporting, count:u32 (key:bytes32 value:bytes32)*, purging,
// removed:u64. A sweep that continues (cursor > 0) on a table whose geometry is not the one it
// started on answers next = kRescan.
absl::StatusOr<std::string> RunSweep(Context& ctx, std::string_view args, SweepAction action) {
  ARDMA_ASSIGN_OR_RETURN(SweepArgs a, ParseSweepArgs(args));
  ARDMA_ASSIGN_OR_RETURN(Table t, OpenByName(ctx, a.name, /*create=*/false));
  std::vector<Exported> exported;
  uint64_t removed = 0, next = kRescan;
  if (a.cursor == 0 || a.geometry == t.geometry.word) {
    ARDMA_ASSIGN_OR_RETURN(next, Sweep(ctx, t, a.name, a.bitmap, action, a.cursor, a.budget,
                                       &exported, &removed));
  }
  std::string out;
  ByteWriter w(&out);
  w.U64(next);
  w.U64(t.geometry.word);
  if (action == SweepAction::kPurge) {
    w.U64(removed);
    return out;
  }
  w.U32(static_cast<uint32_t>(exported.size()));
  for (const Exported& e : exported) {
    w.Bytes32(e.key);
    w.Bytes32(e.value);
  }
  return out;
}

absl::StatusOr<std::string> Export(Context& ctx, std::string_view args) {
  return RunSweep(ctx, args, SweepAction::kExport);
}

absl::StatusOr<std::string> Purge(Context& ctx, std::string_view args) {
  return RunSweep(ctx, args, SweepAction::kPurge);
}

// name:str16 count:u32 (key:bytes32 value:bytes32)* -> count:u32. Unfenced: the slots being
// imported are not served here yet.
absl::StatusOr<std::string> Import(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  uint32_t count;
  if (!r.Str16(&name) || !r.U32(&count)) return absl::InvalidArgumentError("dht.import: bad args");
  ARDMA_ASSIGN_OR_RETURN(Table t, OpenByName(ctx, name, /*create=*/true));
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view key, value;
    if (!r.Bytes32(&key) || !r.Bytes32(&value)) {
      return absl::InvalidArgumentError("dht.import: bad entry");
    }
    ARDMA_RETURN_IF_ERROR(dht::Put(ctx, t, key, value).status());
  }
  if (!r.AtEnd()) return absl::InvalidArgumentError("dht.import: trailing bytes");
  std::string out;
  ByteWriter(&out).U32(count);
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
                     {"dht.size", &ardma::dht::functions::Size},
                     {"dht.tables", &ardma::dht::functions::Tables},
                     {"dht.export", &ardma::dht::functions::Export},
                     {"dht.import", &ardma::dht::functions::Import},
                     {"dht.purge", &ardma::dht::functions::Purge},
                     {"dht.scan", &ardma::dht::functions::ScanTable});
