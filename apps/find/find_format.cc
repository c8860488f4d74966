#include "apps/find/find_format.h"

#include <fnmatch.h>

#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma::find {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

void Put(ByteWriter& w, const Expr& e) {
  w.U8(static_cast<uint8_t>(e.op));
  switch (e.op) {
    case Op::kAnd:
    case Op::kOr:
      Put(w, *e.kids[0]);
      Put(w, *e.kids[1]);
      break;
    case Op::kNot:
      Put(w, *e.kids[0]);
      break;
    case Op::kName:
    case Op::kIname:
    case Op::kPath:
      w.Bytes32(e.text);
      break;
    case Op::kType:
      w.U8(static_cast<uint8_t>(e.type));
      break;
    case Op::kSize:
    case Op::kMtime:
    case Op::kMmin:
      w.U8(static_cast<uint8_t>(e.cmp + 1));
      w.U64(e.n);
      w.U64(e.unit);
      break;
    case Op::kNewer:
      w.U64(static_cast<uint64_t>(absl::ToUnixNanos(e.time)));
      break;
    default:
      break;
  }
}

absl::StatusOr<std::unique_ptr<Expr>> Get(ByteReader& r, int depth) {
  if (depth > 1000) return absl::InvalidArgumentError("find: expression too deep");
  uint8_t op;
  if (!r.U8(&op)) return absl::InvalidArgumentError("find: truncated expression");
  auto e = std::make_unique<Expr>();
  e->op = static_cast<Op>(op);
  switch (e->op) {
    case Op::kAnd:
    case Op::kOr: {
      ARDMA_ASSIGN_OR_RETURN(auto a, Get(r, depth + 1));
      ARDMA_ASSIGN_OR_RETURN(auto b, Get(r, depth + 1));
      e->kids.push_back(std::move(a));
      e->kids.push_back(std::move(b));
      break;
    }
    case Op::kNot: {
      ARDMA_ASSIGN_OR_RETURN(auto a, Get(r, depth + 1));
      e->kids.push_back(std::move(a));
      break;
    }
    case Op::kName:
    case Op::kIname:
    case Op::kPath: {
      std::string_view t;
      if (!r.Bytes32(&t)) return absl::InvalidArgumentError("find: bad pattern");
      e->text = std::string(t);
      break;
    }
    case Op::kType: {
      uint8_t t;
      if (!r.U8(&t)) return absl::InvalidArgumentError("find: bad -type");
      e->type = static_cast<char>(t);
      break;
    }
    case Op::kSize:
    case Op::kMtime:
    case Op::kMmin: {
      uint8_t cmp;
      if (!r.U8(&cmp) || !r.U64(&e->n) || !r.U64(&e->unit) || cmp > 2) {
        return absl::InvalidArgumentError("find: bad comparison");
      }
      e->cmp = static_cast<int>(cmp) - 1;
      break;
    }
    case Op::kNewer: {
      uint64_t ns;
      if (!r.U64(&ns)) return absl::InvalidArgumentError("find: bad -newer");
      e->time = absl::FromUnixNanos(static_cast<int64_t>(ns));
      break;
    }
    case Op::kEmpty:
    case Op::kTrue:
    case Op::kFalse:
    case Op::kPrint:
    case Op::kPrint0:
      break;
    default:
      return absl::InvalidArgumentError("find: unknown expression node");
  }
  return e;
}

bool Compare(int cmp, uint64_t value, uint64_t n) {
  return cmp < 0 ? value < n : cmp > 0 ? value > n : value == n;
}

std::string_view Basename(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || path.size() == 1) return path;
  return path.substr(slash + 1);
}

}  // namespace

std::string EncodeExpr(const Expr& e) {
  std::string out;
  ByteWriter w(&out);
  Put(w, e);
  return out;
}

absl::StatusOr<std::unique_ptr<Expr>> DecodeExpr(std::string_view bytes) {
  ByteReader r(bytes);
  ARDMA_ASSIGN_OR_RETURN(auto e, Get(r, 0));
  if (!r.AtEnd()) return absl::InvalidArgumentError("find: trailing expression bytes");
  return e;
}

std::string EncodeRequest(const Request& q) {
  std::string out;
  ByteWriter w(&out);
  w.Str16(q.fs);
  w.Str16(q.root);
  w.Str16(q.display);
  w.Bytes32(q.expr);
  w.U8(q.implicit_print ? 1 : 0);
  w.U32(q.min_depth);
  w.U32(q.max_depth);
  w.U64(static_cast<uint64_t>(absl::ToUnixNanos(q.now)));
  w.Bytes32(q.cursor);
  w.U32(q.max_entries);
  return out;
}

absl::StatusOr<Request> DecodeRequest(std::string_view bytes) {
  ByteReader r(bytes);
  Request q;
  std::string_view fs, root, display, expr, cursor;
  uint8_t implicit;
  uint64_t now;
  if (!r.Str16(&fs) || !r.Str16(&root) || !r.Str16(&display) || !r.Bytes32(&expr) ||
      !r.U8(&implicit) || !r.U32(&q.min_depth) || !r.U32(&q.max_depth) || !r.U64(&now) ||
      !r.Bytes32(&cursor) || !r.U32(&q.max_entries) || !r.AtEnd()) {
    return absl::InvalidArgumentError("find: bad request");
  }
  q.fs = std::string(fs);
  q.root = std::string(root);
  q.display = std::string(display);
  q.expr = std::string(expr);
  q.implicit_print = implicit != 0;
  q.now = absl::FromUnixNanos(static_cast<int64_t>(now));
  q.cursor = std::string(cursor);
  return q;
}

std::string EncodeBatch(const Batch& b) {
  std::string out;
  ByteWriter w(&out);
  w.Bytes32(b.next);
  w.U8(b.done ? 1 : 0);
  w.U32(static_cast<uint32_t>(b.matches.size()));
  for (const Match& m : b.matches) {
    w.Str16(m.path);
    w.U8(static_cast<uint8_t>(m.terminator));
  }
  return out;
}

absl::StatusOr<Batch> DecodeBatch(std::string_view bytes) {
  ByteReader r(bytes);
  Batch b;
  std::string_view next;
  uint8_t done;
  uint32_t n;
  if (!r.Bytes32(&next) || !r.U8(&done) || !r.U32(&n)) return absl::DataLossError("find: bad batch");
  b.next = std::string(next);
  b.done = done != 0;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view p;
    uint8_t t;
    if (!r.Str16(&p) || !r.U8(&t)) return absl::DataLossError("find: bad match");
    b.matches.push_back({std::string(p), static_cast<char>(t)});
  }
  if (!r.AtEnd()) return absl::DataLossError("find: trailing bytes");
  return b;
}

bool Evaluate(const Expr& e, const dfs::FoundEntry& entry, std::string_view path, absl::Time now,
              std::vector<Match>* out) {
  switch (e.op) {
    case Op::kAnd:
      return Evaluate(*e.kids[0], entry, path, now, out) &&
             Evaluate(*e.kids[1], entry, path, now, out);
    case Op::kOr:
      return Evaluate(*e.kids[0], entry, path, now, out) ||
             Evaluate(*e.kids[1], entry, path, now, out);
    case Op::kNot:
      return !Evaluate(*e.kids[0], entry, path, now, out);
    case Op::kName:
    case Op::kIname:
      return ::fnmatch(e.text.c_str(), std::string(Basename(path)).c_str(),
                       e.op == Op::kIname ? FNM_CASEFOLD : 0) == 0;
    case Op::kPath:
      return ::fnmatch(e.text.c_str(), std::string(path).c_str(), 0) == 0;
    case Op::kType:
      return (e.type == 'd') == (entry.type == dfs::FileType::kDirectory);
    case Op::kSize: {
      uint64_t units = e.unit == 1 ? entry.size : (entry.size + e.unit - 1) / e.unit;
      return Compare(e.cmp, units, e.n);
    }
    case Op::kMtime:
    case Op::kMmin: {
      absl::Duration age = now - entry.mtime;
      absl::Duration unit = e.op == Op::kMtime ? absl::Hours(24) : absl::Minutes(1);
      // Whole days / minutes of age, fractions dropped (as GNU find's -mtime).
      int64_t whole = age < absl::ZeroDuration() ? 0 : absl::IDivDuration(age, unit, &age);
      return Compare(e.cmp, static_cast<uint64_t>(whole), e.n);
    }
    case Op::kNewer:
      return entry.mtime > e.time;
    case Op::kEmpty:
      return entry.size == 0;
    case Op::kTrue:
      return true;
    case Op::kFalse:
      return false;
    case Op::kPrint:
      out->push_back({std::string(path), '\n'});
      return true;
    case Op::kPrint0:
      out->push_back({std::string(path), '\0'});
      return true;
  }
  return false;
}

}  // namespace ardma::find
