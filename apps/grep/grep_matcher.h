// Matcher: ardma-grep's patterns compiled with RE2, with GNU grep's meanings where RE2 allows.
//
// Patterns are GNU BRE by default (-G), ERE with -E, fixed strings with -F, Perl-compatible with
// -P (PCRE2, one pattern, as GNU grep's); a BRE/ERE/fixed pattern containing
// newlines is several patterns. BRE and ERE are translated to RE2 syntax: BRE's \( \) \{ \} \| \+ \?
// become operators and ( ) { } | + ? literals; a backslash inside a bracket expression is literal;
// \< and \> become \b. Matching is on bytes (Latin-1), leftmost-longest as POSIX requires.
// Unsupported, with a clear error: back-references (\1 .. \9).
#ifndef ARDMA_APPS_GREP_GREP_MATCHER_H_
#define ARDMA_APPS_GREP_GREP_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/grep/grep_format.h"

namespace re2 {
class RE2;
}

namespace ardma::grep {

class LiteralSearch;
class PcreProgram;

class Matcher {
 public:
  // INVALID_ARGUMENT (with RE2's explanation) for a bad pattern. GNU's warnings about the
  // patterns ("* at start of expression") go to `warnings`.
  static absl::StatusOr<Matcher> Compile(const Options& options,
                                         std::vector<std::string>* warnings = nullptr);
  // Every line matches (an empty pattern without -w or -x).
  bool always() const { return always_; }

  // Whether `line` (without its newline) matches, honouring -i, -w and -x (not -v). With `spans`,
  // every non-empty, non-overlapping match is added, left to right.
  bool Matches(std::string_view line, std::vector<std::pair<uint32_t, uint32_t>>* spans) const;

  // Where in `text` (many lines) the next line that may match starts its candidate match, at or
  // after `pos`; npos if no line from `pos` on can match. Lets a scanner skip non-matching lines
  // in bulk; each candidate's line must still be checked with Matches.
  size_t NextCandidate(std::string_view text, size_t pos) const;

 private:
  static absl::StatusOr<Matcher> CompilePerl(const Options& options);
  // The first match at or after `pos` of the compiled patterns (RE2 or PCRE2).
  bool Find(std::string_view text, size_t pos, size_t* start, size_t* len) const;
  // The longest match (RE2) that starts at `start` and ends by `end`, for -w's retry.
  bool LongestAt(std::string_view text, size_t start, size_t end, size_t* len) const;

  std::shared_ptr<PcreProgram> pcre_;  // -P: PCRE2 instead of RE2
  std::shared_ptr<const LiteralSearch> literal_;  // every pattern a plain string: candidates
  bool literal_decides_ = false;  // and an occurrence is a match (no -w, no -x)
  std::shared_ptr<const re2::RE2> re_;
  std::shared_ptr<const re2::RE2> finder_;  // the same patterns, ^ and $ at line boundaries
  bool word_ = false;
  bool posix_ = false;   // pcre_ runs BRE/ERE patterns (back-references): leftmost-longest
  bool always_ = false;  // an empty pattern without -w / -x: every line matches
  bool never_ = false;   // no pattern at all (-f of an empty file): no line matches
};

// What TranslatePattern found besides the pattern's form.
struct PatternInfo {
  int groups = 0;         // capturing groups (numbered from the caller's base + 1)
  bool backrefs = false;  // back-references \1..\9, written \g{N}: RE2 cannot run it, PCRE2 can
};

// The RE2 form of one BRE (basic) or ERE (extended) pattern, with GNU's readings where RE2's
// differ: a{,3}, a** and a{2}{3}, an ERE's leading repetition (ignored, with a warning as GNU's),
// a '{' that starts no interval (literal), [=c=] and [.c.]. Its groups are numbered after
// `group_base` (patterns joined by |); a back-reference makes it PCRE2 syntax (info->backrefs).
absl::StatusOr<std::string> TranslatePattern(std::string_view pattern, Syntax syntax,
                                             std::vector<std::string>* warnings = nullptr,
                                             int group_base = 0, PatternInfo* info = nullptr);

}  // namespace ardma::grep

#endif  // ARDMA_APPS_GREP_GREP_MATCHER_H_
