#include "apps/grep/grep_matcher.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "re2/re2.h"

namespace ardma::grep {
namespace {

bool IsWordByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Copies a bracket expression starting at p[i] == '[' into *out (backslashes made literal);
// returns the index after its closing ']'.
size_t CopyBracket(std::string_view p, size_t i, std::string* out) {
  size_t j = i + 1;
  std::string body = "[";
  if (j < p.size() && p[j] == '^') body += p[j++];
  if (j < p.size() && p[j] == ']') body += "\\]", ++j;  // a leading ']' is literal
  while (j < p.size() && p[j] != ']') {
    if (p[j] == '[' && j + 1 < p.size() && (p[j + 1] == ':' || p[j + 1] == '=' || p[j + 1] == '.')) {
      char kind = p[j + 1];
      size_t close = p.find(std::string{kind, ']'}, j + 2);
      if (close != std::string_view::npos) {
        body.append(p.substr(j, close + 2 - j));
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
  if (j >= p.size()) {  // no closing ']': let RE2 report it
    out->append(body);
    return j;
  }
  body += ']';
  out->append(body);
  return j + 1;
}

}  // namespace

absl::StatusOr<std::string> TranslatePattern(std::string_view p, Syntax syntax) {
  if (syntax == Syntax::kFixed) return RE2::QuoteMeta(re2::StringPiece(p.data(), p.size()));
  bool basic = syntax == Syntax::kBasic;
  std::string out;
  bool at_start = true;  // where '*' is literal and '^' an anchor (BRE)
  for (size_t i = 0; i < p.size();) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char d = p[i + 1];
      i += 2;
      if (d >= '1' && d <= '9') {
        return absl::InvalidArgumentError("back-references (\\1 .. \\9) are not supported");
      }
      if (basic && (d == '(' || d == '|')) {
        out += d;
        at_start = true;
        continue;
      }
      at_start = false;
      if (basic && (d == ')' || d == '{' || d == '}' || d == '+' || d == '?')) {
        out += d;
      } else if (d == '<' || d == '>') {
        out += "\\b";
      } else if (d == 'w' || d == 'W' || d == 's' || d == 'S' || d == 'b' || d == 'B') {
        out += '\\';
        out += d;
      } else {
        out += RE2::QuoteMeta(re2::StringPiece(&d, 1));
      }
      continue;
    }
    if (c == '[') {
      i = CopyBracket(p, i, &out);
      at_start = false;
      continue;
    }
    if (basic) {
      if (c == '(' || c == ')' || c == '{' || c == '}' || c == '|' || c == '+' || c == '?') {
        out += '\\';
        out += c;
      } else if (c == '*' && at_start) {
        out += "\\*";
      } else if (c == '^' && !at_start) {
        out += "\\^";
      } else if (c == '$' && i + 1 < p.size() && p.substr(i + 1, 2) != "\\)" &&
                 p.substr(i + 1, 2) != "\\|") {
        out += "\\$";
      } else {
        out += c;
      }
    } else {
      out += c;
      if (c == '(' || c == '|') {
        at_start = true;
        ++i;
        continue;
      }
    }
    at_start = basic && c == '^' && at_start;
    ++i;
  }
  return out;
}

absl::StatusOr<Matcher> Matcher::Compile(const Options& options) {
  std::vector<std::string> alternatives;
  bool has_empty = false;
  for (const std::string& pattern : options.patterns) {
    for (absl::string_view one : absl::StrSplit(pattern, '\n')) {
      if (one.empty()) has_empty = true;
      ARDMA_ASSIGN_OR_RETURN(std::string re,
                             TranslatePattern(std::string_view(one.data(), one.size()),
                                              options.syntax));
      alternatives.push_back(options.line ? absl::StrCat("^(?:", re, ")$")
                                          : absl::StrCat("(?:", re, ")"));
    }
  }
  if (alternatives.empty()) return absl::InvalidArgumentError("no pattern");
  RE2::Options re_options;
  re_options.set_encoding(RE2::Options::EncodingLatin1);
  re_options.set_case_sensitive(!options.ignore_case);
  re_options.set_longest_match(true);
  re_options.set_log_errors(false);
  std::string joined;
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i > 0) joined += '|';
    joined += alternatives[i];
  }
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
  return m;
}

size_t Matcher::NextCandidate(std::string_view text, size_t pos) const {
  if (always_) return pos < text.size() ? pos : std::string_view::npos;
  re2::StringPiece all(text.data(), text.size());
  re2::StringPiece m;
  if (pos > text.size() || !finder_->Match(all, pos, all.size(), RE2::UNANCHORED, &m, 1)) {
    return std::string_view::npos;
  }
  return static_cast<size_t>(m.data() - text.data());
}

bool Matcher::Matches(std::string_view line,
                      std::vector<std::pair<uint32_t, uint32_t>>* spans) const {
  re2::StringPiece text(line.data(), line.size());
  if (spans == nullptr && !word_) return always_ || RE2::PartialMatch(text, *re_);
  bool any = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    re2::StringPiece m;
    if (!re_->Match(text, pos, text.size(), RE2::UNANCHORED, &m, 1)) break;
    size_t start = static_cast<size_t>(m.data() - text.data()), len = m.size();
    if (word_) {
      bool before_ok = start == 0 || !IsWordByte(text[start - 1]);
      bool after_ok = start + len == text.size() || !IsWordByte(text[start + len]);
      if (!before_ok || !after_ok || (len == 0 && !text.empty())) {
        pos = start + 1;
        continue;
      }
    }
    any = true;
    if (spans == nullptr) return true;
    if (len > 0) spans->emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(len));
    pos = len > 0 ? start + len : start + 1;
  }
  return any || (always_ && !word_);
}

}  // namespace ardma::grep
