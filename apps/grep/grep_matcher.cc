#include "apps/grep/grep_matcher.h"

#include <cctype>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "apps/grep/literal_search.h"
#include "apps/grep/pcre_program.h"
#include "core/status_macros.h"
#include "re2/re2.h"

namespace ardma::grep {
namespace {

bool IsWordByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Copies a bracket expression starting at p[i] == '[' into *out (backslashes made literal;
// [=c=] and [.c.] of one character become that character, as in the C locale); returns the index
// after its closing ']'.
absl::StatusOr<size_t> CopyBracket(std::string_view p, size_t i, std::string* out) {
  size_t j = i + 1;
  std::string body = "[";
  if (j < p.size() && p[j] == '^') body += p[j++];
  if (j < p.size() && p[j] == ']') body += "\\]", ++j;  // a leading ']' is literal
  while (j < p.size() && p[j] != ']') {
    if (p[j] == '[' && j + 1 < p.size() &&
        (p[j + 1] == ':' || p[j + 1] == '=' || p[j + 1] == '.')) {
      char kind = p[j + 1];
      size_t close = p.find(std::string{kind, ']'}, j + 2);
      if (close != std::string_view::npos) {
        std::string_view name = p.substr(j + 2, close - j - 2);
        if (kind == ':') {
          body.append(p.substr(j, close + 2 - j));
        } else if (name.size() == 1) {  // the C locale's only collating elements: characters
          char c = name[0];
          if (c == '\\' || c == ']' || c == '[' || c == '^' || c == '-') body += '\\';
          body += c;
        } else {
          return absl::InvalidArgumentError(kind == '.' ? "Invalid collation character"
                                                        : "Invalid character class name");
        }
        j = close + 2;
        continue;
      }
    }
    if (p[j] == '\\') {
      body += "\\\\";
    } else {
      body += p[j];
    }
    ++j;
  }
  if (j >= p.size()) return absl::InvalidArgumentError("Unmatched [, [^, [:, [., or [=");
  body += ']';
  out->append(body);
  return j + 1;
}

// An interval's body at p[i] (just after '{' or '\{'): "m", "m,", ",n", "m,n"; its RE2 form and
// the index after the closing '}' (or '\}' in BRE), or nullopt if it is not one.
std::optional<std::pair<std::string, size_t>> Interval(std::string_view p, size_t i, bool basic) {
  size_t j = i;
  std::string min, max;
  while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) min += p[j++];
  bool comma = j < p.size() && p[j] == ',';
  if (comma) {
    ++j;
    while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) max += p[j++];
  }
  if (min.empty() && !comma) return std::nullopt;
  std::string_view close = basic ? "\\}" : "}";
  if (p.substr(j, close.size()) != close) return std::nullopt;
  std::string re = "{" + (min.empty() ? std::string("0") : min) + (comma ? "," + max : "") + "}";
  return std::make_pair(re, j + close.size());
}

// If `p` is plain strings joined by its syntax's alternation (ERE |, BRE \|), adds them to
// `out` and returns true.
bool AddLiterals(std::string_view p, Syntax syntax, std::vector<std::string>* out) {
  if (p.empty()) return false;
  if (syntax == Syntax::kFixed) {
    out->emplace_back(p);
    return true;
  }
  std::string_view bar = syntax == Syntax::kBasic ? "\\|" : "|";
  std::string_view specials = syntax == Syntax::kBasic ? "\\.[]*^$" : "\\.[]*^$+?{}()";
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t end = p.find(bar, start);
    std::string_view part = p.substr(start, end == std::string_view::npos ? end : end - start);
    if (part.empty() || part.find_first_of(specials) != std::string_view::npos ||
        (syntax != Syntax::kBasic && part.find('|') != std::string_view::npos)) {
      return false;
    }
    parts.emplace_back(part);
    if (end == std::string_view::npos) break;
    start = end + bar.size();
  }
  for (std::string& part : parts) out->push_back(std::move(part));
  return true;
}

bool IsAsciiLetter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

// The end of the RE2 character class that starts at re[i] == '['.
size_t ClassEnd(std::string_view re, size_t i) {
  size_t j = i + 1;
  if (j < re.size() && re[j] == '^') ++j;
  while (j < re.size() && re[j] != ']') {
    if (re[j] == '\\') {
      j += 2;
    } else if (re.substr(j, 2) == "[:") {
      size_t close = re.find(":]", j + 2);
      j = close == std::string_view::npos ? re.size() : close + 2;
    } else {
      ++j;
    }
  }
  return std::min(j + 1, re.size());
}

// The class `cls` (RE2 syntax, as TranslatePattern writes it) with the other case of every ASCII
// letter it holds added ([:lower:] and [:upper:] each bring the other).
std::string FoldClass(std::string_view cls) {
  std::string extra;
  bool letter[256] = {};
  size_t j = 1;
  if (j < cls.size() && cls[j] == '^') ++j;
  auto item = [&](size_t at, size_t* next) -> int {  // a literal byte, or -1 for a named class
    if (cls[at] == '\\' && at + 1 < cls.size()) {
      *next = at + 2;
      return static_cast<unsigned char>(cls[at + 1]);
    }
    if (cls.substr(at, 2) == "[:") {
      size_t close = cls.find(":]", at + 2);
      std::string_view name = cls.substr(at + 2, close - at - 2);
      if (name == "lower") extra += "[:upper:]";
      if (name == "upper") extra += "[:lower:]";
      *next = close + 2;
      return -1;
    }
    *next = at + 1;
    return static_cast<unsigned char>(cls[at]);
  };
  while (j + 1 < cls.size()) {  // (the last byte is the closing ']')
    size_t next;
    int lo = item(j, &next);
    int hi = lo;
    if (lo >= 0 && next + 1 < cls.size() && cls[next] == '-' && next + 2 < cls.size()) {
      size_t after;
      hi = item(next + 1, &after);
      if (hi >= 0) next = after;
      else hi = lo;
    }
    for (int c = lo; c >= 0 && c <= hi; ++c) {
      if (IsAsciiLetter(static_cast<unsigned char>(c))) letter[c] = true;
    }
    j = next;
  }
  for (int c = 0; c < 256; ++c) {
    if (letter[c] && !letter[c ^ 0x20]) extra += static_cast<char>(c ^ 0x20);
  }
  std::string out(cls.substr(0, cls.size() - 1));
  return out + extra + "]";
}

// `re` (RE2 syntax, as TranslatePattern writes it) matching ASCII letters in either case and
// every other byte as it is: GNU grep's -i in the C locale. (RE2's own case folding would also
// fold Latin-1 letters, as é and É.)
std::string FoldAsciiCase(std::string_view re) {
  std::string out;
  for (size_t i = 0; i < re.size();) {
    unsigned char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      size_t n = 2;
      if (re.substr(i, 3) == "\\g{") n = re.find('}', i) + 1 - i;  // a back-reference
      out.append(re.substr(i, n));
      i += n;
    } else if (c == '[') {
      size_t end = ClassEnd(re, i);
      out += FoldClass(re.substr(i, end - i));
      i = end;
    } else if (c == '(' && re.substr(i, 3) == "(?:") {
      out += "(?:";
      i += 3;
    } else if (IsAsciiLetter(c)) {
      out += '[';
      out += static_cast<char>(c);
      out += static_cast<char>(c ^ 0x20);
      out += ']';
      ++i;
    } else {
      out += static_cast<char>(c);
      ++i;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> TranslatePattern(std::string_view p, Syntax syntax,
                                             std::vector<std::string>* warnings, int group_base,
                                             PatternInfo* info) {
  PatternInfo local;
  if (info == nullptr) info = &local;
  if (syntax == Syntax::kFixed) return RE2::QuoteMeta(re2::StringPiece(p.data(), p.size()));
  bool basic = syntax == Syntax::kBasic;
  std::string out;
  // Where the last atom starts in `out` (npos: none yet in this branch), whether a repetition
  // followed it, and where each open group starts.
  size_t atom = std::string::npos;
  bool repeated = false;
  std::vector<size_t> groups;
  std::vector<int> open_numbers;  // the number of each open group
  std::vector<bool> closed;       // per group number - 1: whether it has ended
  bool at_start = true;  // where BRE's '*' is literal and '^' an anchor
  auto begin_atom = [&] {
    atom = out.size();
    repeated = false;
    at_start = false;
  };
  // A repetition operator `op`: after another one it applies to both ((a{2}){3}, a** = a*).
  auto repeat = [&](std::string_view op) {
    if (repeated) {
      out.insert(atom, "(?:");
      out += ')';
    }
    out += op;
    repeated = true;
    at_start = false;
  };
  for (size_t i = 0; i < p.size();) {
    char c = p[i];
    // Operators, after BRE's backslash or ERE's bare character.
    bool escaped = c == '\\' && i + 1 < p.size();
    char d = escaped ? p[i + 1] : c;
    size_t next = i + (escaped ? 2 : 1);
    bool op = basic == escaped;  // BRE: \( \) \| \{ \+ \?; ERE: ( ) | { + ?
    if (escaped && d >= '1' && d <= '9') {
      // Only a group that has ended can be referred to, as in glibc's regcomp.
      size_t n = static_cast<size_t>(d - '0');
      if (n > closed.size() || !closed[n - 1]) {
        return absl::InvalidArgumentError("Invalid back reference");
      }
      begin_atom();
      absl::StrAppend(&out, "\\g{", group_base + static_cast<int>(n), "}");
      info->backrefs = true;
      i = next;
      continue;
    }
    if (op && d == '(') {
      groups.push_back(out.size());
      closed.push_back(false);
      open_numbers.push_back(static_cast<int>(closed.size()));
      out += '(';
      atom = std::string::npos;
      repeated = false;
      at_start = true;
      i = next;
      continue;
    }
    if (op && d == ')' && !groups.empty()) {
      closed[open_numbers.back() - 1] = true;
      open_numbers.pop_back();
      out += ')';
      atom = groups.back();
      groups.pop_back();
      repeated = false;
      at_start = false;
      i = next;
      continue;
    }
    if (op && d == '|') {
      out += '|';
      atom = std::string::npos;
      repeated = false;
      at_start = true;
      i = next;
      continue;
    }
    bool star = !escaped && c == '*';
    if ((op && (d == '+' || d == '?')) || star) {
      if (atom == std::string::npos) {
        if (basic) {  // BRE: a literal at the start
          begin_atom();
          out += '\\';
          out += d;
        } else if (warnings != nullptr) {  // ERE: GNU warns and ignores it
          warnings->push_back(absl::StrCat(std::string(1, d), " at start of expression"));
        }
        i = next;
        continue;
      }
      repeat(std::string(1, d));
      i = next;
      continue;
    }
    if (op && d == '{') {
      std::optional<std::pair<std::string, size_t>> interval = Interval(p, next, basic);
      if (interval && atom != std::string::npos) {
        repeat(interval->first);
        i = interval->second;
        continue;
      }
      if (basic && !interval)
        return absl::InvalidArgumentError("Invalid preceding regular expression");
      begin_atom();  // ERE: a '{' that starts no interval is literal, as GNU's
      out += "\\{";
      i = next;
      continue;
    }
    if (escaped) {
      begin_atom();
      if (d == '<' || d == '>') {
        out += "\\b";
        atom = std::string::npos;  // an anchor, not an atom
      } else if (d == 'w' || d == 'W' || d == 's' || d == 'S' || d == 'b' || d == 'B') {
        out += '\\';
        out += d;
      } else {
        out += RE2::QuoteMeta(re2::StringPiece(&d, 1));
      }
      i = next;
      continue;
    }
    if (c == '[') {
      begin_atom();
      ARDMA_ASSIGN_OR_RETURN(i, CopyBracket(p, i, &out));
      continue;
    }
    if (basic &&
        (c == '(' || c == ')' || c == '{' || c == '}' || c == '|' || c == '+' || c == '?')) {
      begin_atom();
      out += '\\';
      out += c;
    } else if (!basic && (c == ')' || c == '}')) {  // unmatched: literal, as GNU's
      begin_atom();
      out += '\\';
      out += c;
    } else if (c == '^' && (!basic || at_start)) {
      out += '^';  // an anchor (BRE: only at the start of the pattern or a group)
      atom = std::string::npos;
      at_start = basic;
    } else if (c == '^') {
      begin_atom();
      out += "\\^";
    } else if (c == '$' && basic && i + 1 < p.size() && p.substr(i + 1, 2) != "\\)" &&
               p.substr(i + 1, 2) != "\\|") {
      begin_atom();
      out += "\\$";
    } else if (c == '$') {
      out += '$';
      atom = std::string::npos;
    } else {
      begin_atom();
      out += c;
    }
    ++i;
  }
  info->groups = static_cast<int>(closed.size());
  return out;
}

absl::StatusOr<Matcher> Matcher::Compile(const Options& options,
                                         std::vector<std::string>* warnings) {
  if (options.syntax == Syntax::kPerl) return CompilePerl(options);
  std::vector<std::string> alternatives, literals;
  bool has_empty = false, all_literal = true, backrefs = false;
  int groups = 0;  // capturing groups in the patterns so far (back-references are renumbered)
  for (const std::string& pattern : options.patterns) {
    for (absl::string_view one : absl::StrSplit(pattern, '\n')) {
      if (one.empty()) has_empty = true;
      // Plain strings (no operator of its syntax but alternation) are searched for as they are.
      if (!AddLiterals(std::string_view(one.data(), one.size()), options.syntax, &literals)) {
        all_literal = false;
      }
      PatternInfo info;
      ARDMA_ASSIGN_OR_RETURN(std::string re,
                             TranslatePattern(std::string_view(one.data(), one.size()),
                                              options.syntax, warnings, groups, &info));
      groups += info.groups;
      backrefs = backrefs || info.backrefs;
      alternatives.push_back(options.line ? absl::StrCat("^(?:", re, ")$")
                                          : absl::StrCat("(?:", re, ")"));
    }
  }
  if (alternatives.empty()) {  // -f with an empty file: no pattern, so nothing matches
    Matcher never;
    never.never_ = true;
    return never;
  }
  std::string joined;
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i > 0) joined += '|';
    // -i folds ASCII letters only, as GNU grep in the C locale (RE2's -i folds Latin-1 too;
    // PCRE2's, with its C tables, does not, and folds what a back-reference matches too).
    joined += options.ignore_case && !backrefs ? FoldAsciiCase(alternatives[i]) : alternatives[i];
  }
  if (backrefs) {
    // Back-references: PCRE2 runs the patterns (a backtracking matcher, as glibc's), with POSIX's
    // leftmost-longest matches found by trying every way to match at the leftmost start.
    ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<PcreProgram> program,
                           PcreProgram::Compile(joined, options.ignore_case,
                                                /*posix=*/true, options.null_data));
    Matcher m;
    m.pcre_ = std::move(program);
    m.posix_ = true;
    m.word_ = options.word && !options.line;
    m.always_ = has_empty && !options.word && !options.line;
    return m;
  }
  RE2::Options re_options;
  re_options.set_encoding(RE2::Options::EncodingLatin1);
  re_options.set_longest_match(true);
  re_options.set_log_errors(false);
  re_options.set_dot_nl(options.null_data);  // -z: a newline is an ordinary byte
  auto re = std::make_shared<RE2>(joined, re_options);
  if (!re->ok()) return absl::InvalidArgumentError(re->error());
  RE2::Options finder_options = re_options;
  finder_options.set_longest_match(false);  // any candidate will do: the line is checked anyway
  auto finder = std::make_shared<RE2>(absl::StrCat("(?m)", joined), finder_options);
  if (!finder->ok()) return absl::InvalidArgumentError(finder->error());
  Matcher m;
  m.re_ = std::move(re);
  m.finder_ = std::move(finder);
  m.word_ = options.word && !options.line;
  m.always_ = has_empty && !options.word && !options.line;
  if (all_literal && !literals.empty()) {
    m.literal_ = std::make_shared<LiteralSearch>(std::move(literals), options.ignore_case);
    m.literal_decides_ = !options.word && !options.line;  // an occurrence is a match
  }
  return m;
}

absl::StatusOr<Matcher> Matcher::CompilePerl(const Options& options) {
  // GNU grep -P takes one pattern (no -e twice, no newline in it).
  if (options.patterns.size() != 1 || options.patterns[0].find('\n') != std::string::npos) {
    return absl::InvalidArgumentError("the -P option only supports a single pattern");
  }
  std::string p = options.patterns[0];
  // -x and -w as GNU grep words them for PCRE.
  if (options.line) {
    p = absl::StrCat("^(?:", p, ")$");
  } else if (options.word) {
    p = absl::StrCat("(?<!\\w)(?:", p, ")(?!\\w)");
  }
  ARDMA_ASSIGN_OR_RETURN(std::shared_ptr<PcreProgram> program,
                         PcreProgram::Compile(p, options.ignore_case));
  Matcher m;
  m.pcre_ = std::move(program);
  return m;
}

bool Matcher::Find(std::string_view text, size_t pos, size_t* start, size_t* len) const {
  if (pcre_ != nullptr) {
    if (!pcre_->Find(text, pos, start, len)) return false;
    // BRE/ERE: the longest of the matches at the leftmost start, as POSIX's.
    if (posix_) pcre_->LongestAt(text, *start, text.size(), len);
    return true;
  }
  re2::StringPiece all(text.data(), text.size());
  re2::StringPiece m;
  if (!re_->Match(all, pos, all.size(), RE2::UNANCHORED, &m, 1)) return false;
  *start = static_cast<size_t>(m.data() - text.data());
  *len = m.size();
  return true;
}

bool Matcher::LongestAt(std::string_view text, size_t start, size_t end, size_t* len) const {
  if (pcre_ != nullptr) return pcre_->LongestAt(text, start, end, len);
  // The text beyond `end` stays context: $ does not match at `end` (GNU's not_eol).
  re2::StringPiece all(text.data(), text.size());
  re2::StringPiece m;
  if (!re_->Match(all, start, end, RE2::ANCHOR_START, &m, 1)) return false;
  *len = m.size();
  return true;
}

size_t Matcher::NextCandidate(std::string_view text, size_t pos) const {
  if (never_) return std::string_view::npos;
  // -P: a multi-line search could misread \A, \z or lookbehinds; every line is a candidate.
  if (always_ || pcre_ != nullptr) return pos < text.size() ? pos : std::string_view::npos;
  if (literal_ != nullptr) return literal_->Find(text, pos);
  re2::StringPiece all(text.data(), text.size());
  re2::StringPiece m;
  if (pos > text.size() || !finder_->Match(all, pos, all.size(), RE2::UNANCHORED, &m, 1)) {
    return std::string_view::npos;
  }
  return static_cast<size_t>(m.data() - text.data());
}

bool Matcher::Matches(std::string_view line,
                      std::vector<std::pair<uint32_t, uint32_t>>* spans) const {
  if (never_) return false;
  if (spans == nullptr && literal_decides_) {
    return literal_->Find(line, 0) != std::string_view::npos;
  }
  if (spans == nullptr && !word_ && re_ != nullptr) {
    return always_ || RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *re_);
  }
  if (spans == nullptr && !word_ && pcre_ != nullptr) {  // any match will do: not the longest
    size_t start, len;
    return always_ || pcre_->Find(line, 0, &start, &len);
  }
  bool any = false;
  size_t pos = 0;
  while (pos <= line.size()) {
    size_t start, len;
    if (!Find(line, pos, &start, &len)) break;
    // -w, as GNU grep tries it: a match (even an empty one) with no word byte on either side; else
    // the longest shorter one at the same place, if not empty; else the next match further on.
    bool whole = !word_;
    while (!whole) {
      whole = (start == 0 || !IsWordByte(line[start - 1])) &&
              (start + len == line.size() || !IsWordByte(line[start + len]));
      if (whole || len == 0 || !LongestAt(line, start, start + len - 1, &len) || len == 0) break;
    }
    if (!whole) {
      pos = start + 1;
      continue;
    }
    any = true;
    if (spans == nullptr) return true;
    if (len > 0) spans->emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(len));
    pos = len > 0 ? start + len : start + 1;
  }
  return any || (always_ && !word_);
}

}  // namespace ardma::grep
