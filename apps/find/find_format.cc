#include "apps/find/find_format.h"

#include <fnmatch.h>
#include <regex.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
    case Op::kComma:
      Put(w, *e.kids[0]);
      Put(w, *e.kids[1]);
      break;
    case Op::kNot:
      Put(w, *e.kids[0]);
      break;
    case Op::kName:
    case Op::kIname:
    case Op::kPath:
    case Op::kIpath:
    case Op::kType:
    case Op::kPrintf:
      w.Bytes32(e.text);
      break;
    case Op::kRegex:
    case Op::kIregex:
      w.Bytes32(e.text);
      w.U8(static_cast<uint8_t>(e.n));
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
    case Op::kOr:
    case Op::kComma: {
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
    case Op::kPath:
    case Op::kIpath:
    case Op::kType:
    case Op::kPrintf: {
      std::string_view t;
      if (!r.Bytes32(&t)) return absl::InvalidArgumentError("find: bad pattern");
      e->text = std::string(t);
      break;
    }
    case Op::kRegex:
    case Op::kIregex: {
      std::string_view t;
      uint8_t type;
      if (!r.Bytes32(&t) || !r.U8(&type) || type > 7) {
        return absl::InvalidArgumentError("find: bad regex");
      }
      e->text = std::string(t);
      e->n = type;
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
    case Op::kPrune:
    case Op::kPrint:
    case Op::kPrint0:
    case Op::kLs:
      break;
    default:  // -exec, -ok and -delete never travel
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

// GNU regex syntax bits for each -regextype (findutils' table).
reg_syntax_t Syntax(RegexType t) {
  switch (t) {
    case RegexType::kPosixBasic:
      return RE_SYNTAX_POSIX_BASIC;
    case RegexType::kPosixExtended:
      return RE_SYNTAX_POSIX_EXTENDED;
    case RegexType::kPosixEgrep:
      return RE_SYNTAX_POSIX_EGREP;
    case RegexType::kPosixAwk:
      return RE_SYNTAX_POSIX_AWK;
    case RegexType::kGrep:
      return RE_SYNTAX_GREP;
    case RegexType::kEgrep:
      return RE_SYNTAX_EGREP;
    case RegexType::kEmacs:
    case RegexType::kFindutilsDefault:
      break;
  }
  return RE_SYNTAX_EMACS;
}

struct CompiledRegex {
  re_pattern_buffer buf{};
  ~CompiledRegex() { regfree(&buf); }
};

// re_compile_pattern reads the process-wide re_syntax_options: one compile at a time.
absl::Mutex regex_mu;

absl::StatusOr<std::shared_ptr<CompiledRegex>> Compile(std::string_view pattern, RegexType type,
                                                       bool icase) {
  auto re = std::make_shared<CompiledRegex>();
  absl::MutexLock lock(&regex_mu);
  re_syntax_options = Syntax(type) | (icase ? RE_ICASE : 0);
  const char* error = re_compile_pattern(pattern.data(), pattern.size(), &re->buf);
  if (error != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid regular expression `", ToAbsl(pattern), "': ", error));
  }
  return re;
}

// The whole path must match, as GNU find's -regex.
bool RegexMatches(const Expr& e, std::string_view path) {
  auto* re = static_cast<const CompiledRegex*>(e.regex.get());
  if (re == nullptr) return false;
  regoff_t n = re_match(const_cast<re_pattern_buffer*>(&re->buf), path.data(),
                        static_cast<regoff_t>(path.size()), 0, nullptr);
  return n == static_cast<regoff_t>(path.size());
}

}  // namespace

absl::Status CheckRegex(std::string_view pattern, RegexType type, bool icase) {
  return Compile(pattern, type, icase).status();
}

absl::Status CompileRegexes(Expr& e) {
  if (e.op == Op::kRegex || e.op == Op::kIregex) {
    ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<CompiledRegex> re,
                           Compile(e.text, static_cast<RegexType>(e.n), e.op == Op::kIregex));
    e.regex = std::move(re);
  }
  for (auto& k : e.kids) ARDMA_RETURN_IF_ERROR(CompileRegexes(*k));
  return absl::OkStatus();
}

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
  ARDMA_RETURN_IF_ERROR(CompileRegexes(*e));
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
  w.U8(q.follow_start ? 1 : 0);
  w.U32(static_cast<uint32_t>(q.pruned.size()));
  for (const std::string& p : q.pruned) w.Str16(p);
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
      !r.Bytes32(&cursor) || !r.U32(&q.max_entries)) {
    return absl::InvalidArgumentError("find: bad request");
  }
  uint8_t follow_start;
  uint32_t pruned;
  if (!r.U8(&follow_start) || !r.U32(&pruned)) {
    return absl::InvalidArgumentError("find: bad request");
  }
  q.follow_start = follow_start != 0;
  for (uint32_t i = 0; i < pruned; ++i) {
    std::string_view p;
    if (!r.Str16(&p)) return absl::InvalidArgumentError("find: bad request");
    q.pruned.emplace_back(p);
  }
  if (!r.AtEnd()) return absl::InvalidArgumentError("find: bad request");
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
    w.Bytes32(m.path);
    w.U8(static_cast<uint8_t>(m.terminator));
  }
  w.U32(static_cast<uint32_t>(b.pruned.size()));
  for (const std::string& p : b.pruned) w.Str16(p);
  return out;
}

absl::StatusOr<Batch> DecodeBatch(std::string_view bytes) {
  ByteReader r(bytes);
  Batch b;
  std::string_view next;
  uint8_t done;
  uint32_t n;
  if (!r.Bytes32(&next) || !r.U8(&done) || !r.U32(&n))
    return absl::DataLossError("find: bad batch");
  b.next = std::string(next);
  b.done = done != 0;
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view p;
    uint8_t t;
    if (!r.Bytes32(&p) || !r.U8(&t)) return absl::DataLossError("find: bad match");
    b.matches.push_back({std::string(p), static_cast<char>(t)});
  }
  uint32_t pruned;
  if (!r.U32(&pruned)) return absl::DataLossError("find: bad batch");
  for (uint32_t i = 0; i < pruned; ++i) {
    std::string_view p;
    if (!r.Str16(&p)) return absl::DataLossError("find: bad batch");
    b.pruned.emplace_back(p);
  }
  if (!r.AtEnd()) return absl::DataLossError("find: trailing bytes");
  return b;
}

bool NeedsClient(const Expr& e) {
  if (e.op == Op::kExec || e.op == Op::kOk || e.op == Op::kDelete) return true;
  for (const auto& k : e.kids) {
    if (NeedsClient(*k)) return true;
  }
  return false;
}

bool OutsidePruned(std::vector<std::string>& pruned, std::string_view path) {
  while (!pruned.empty()) {
    const std::string& dir = pruned.back();
    if (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
        (path[dir.size()] == '/' || dir.back() == '/')) {
      return false;
    }
    pruned.pop_back();  // the walk has left it
  }
  return true;
}

bool Evaluate(const Expr& e, const dfs::FoundEntry& entry, std::string_view path,
              std::string_view root, Env& env, std::vector<Match>* out) {
  switch (e.op) {
    case Op::kAnd:
      return Evaluate(*e.kids[0], entry, path, root, env, out) &&
             Evaluate(*e.kids[1], entry, path, root, env, out);
    case Op::kOr:
      return Evaluate(*e.kids[0], entry, path, root, env, out) ||
             Evaluate(*e.kids[1], entry, path, root, env, out);
    case Op::kComma:
      Evaluate(*e.kids[0], entry, path, root, env, out);
      return Evaluate(*e.kids[1], entry, path, root, env, out);
    case Op::kNot:
      return !Evaluate(*e.kids[0], entry, path, root, env, out);
    case Op::kName:
    case Op::kIname:
      return ::fnmatch(e.text.c_str(), std::string(Basename(path)).c_str(),
                       e.op == Op::kIname ? FNM_CASEFOLD : 0) == 0;
    case Op::kPath:
    case Op::kIpath:
      return ::fnmatch(e.text.c_str(), std::string(path).c_str(),
                       e.op == Op::kIpath ? FNM_CASEFOLD : 0) == 0;
    case Op::kRegex:
    case Op::kIregex:
      return RegexMatches(e, path);
    case Op::kType: {
      char t = entry.type == dfs::FileType::kDirectory ? 'd'
               : entry.type == dfs::FileType::kSymlink ? 'l'
                                                       : 'f';
      return e.text.find(t) != std::string::npos;
    }
    case Op::kSize: {
      uint64_t units = e.unit == 1 ? entry.size : (entry.size + e.unit - 1) / e.unit;
      return Compare(e.cmp, units, e.n);
    }
    case Op::kMtime: {
      // Whole days of age, fractions dropped (GNU find's -mtime).
      absl::Duration age = env.now - entry.mtime;
      int64_t whole =
          age < absl::ZeroDuration() ? 0 : absl::IDivDuration(age, absl::Hours(24), &age);
      return Compare(e.cmp, static_cast<uint64_t>(whole), e.n);
    }
    case Op::kMmin: {
      // GNU find's -mmin: -N younger than N minutes, +N older, N in ((N-1) min, N min].
      absl::Duration age = env.now - entry.mtime;
      absl::Duration n = absl::Minutes(static_cast<int64_t>(e.n));
      if (e.cmp < 0) return age < n;
      if (e.cmp > 0) return age > n;
      return age > n - absl::Minutes(1) && age <= n;
    }
    case Op::kNewer:
      return entry.mtime > e.time;
    case Op::kEmpty:
      return entry.size == 0 && entry.type != dfs::FileType::kSymlink;
    case Op::kTrue:
      return true;
    case Op::kFalse:
      return false;
    case Op::kPrune:
      if (entry.type == dfs::FileType::kDirectory) env.prune = true;
      return true;
    case Op::kPrint:
      out->push_back({std::string(path), '\n'});
      return true;
    case Op::kPrint0:
      out->push_back({std::string(path), '\0'});
      return true;
    case Op::kPrintf:
      out->push_back({FormatPrintf(e.text, entry, path, root, env), Match::kRaw});
      return true;
    case Op::kLs:
      out->push_back({FormatLs(entry, path, env), '\n'});
      return true;
    case Op::kExec:
    case Op::kOk:
      return env.actions != nullptr && env.actions->Exec(e, path);
    case Op::kDelete:
      return env.actions != nullptr && env.actions->Delete(entry, path);
  }
  return false;
}

}  // namespace ardma::find
