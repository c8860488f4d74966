// A PCRE2 program for ardma-grep -P: GNU grep's Perl-compatible patterns, matched on bytes (the C
// locale), JIT-compiled when the platform allows. Also runs BRE/ERE patterns with
// back-references (translated), which need POSIX's longest match: LongestAt.
#ifndef ARDMA_APPS_GREP_PCRE_PROGRAM_H_
#define ARDMA_APPS_GREP_PCRE_PROGRAM_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ardma::grep {

class PcreProgram {
 public:
  // INVALID_ARGUMENT with PCRE2's message (as GNU grep prints it) for a bad pattern.
  // `posix`: a translated BRE/ERE ($ only at the end; LongestAt works); `dot_all`: -z's records
  // (. matches a newline).
  static absl::StatusOr<std::shared_ptr<PcreProgram>> Compile(std::string_view pattern,
                                                              bool ignore_case, bool posix = false,
                                                              bool dot_all = false);
  ~PcreProgram();
  PcreProgram(const PcreProgram&) = delete;
  PcreProgram& operator=(const PcreProgram&) = delete;

  // The first match in `text` at or after `pos` (lookbehinds see the bytes before `pos`).
  // Not thread-safe: one program serves one scan at a time.
  bool Find(std::string_view text, size_t pos, size_t* start, size_t* length) const;
  // The longest match that starts at `start` and ends by `end` (every way to match there is
  // tried, as a POSIX matcher would); false if there is none. Only for `posix` programs.
  bool LongestAt(std::string_view text, size_t start, size_t end, size_t* length) const;

 private:
  PcreProgram() = default;
  void* code_ = nullptr;        // pcre2_code_8*
  void* match_data_ = nullptr;  // pcre2_match_data_8*
  void* longest_code_ = nullptr;   // posix: the pattern then a callout that records where it ends
  void* match_context_ = nullptr;  // pcre2_match_context_8* with that callout
};

}  // namespace ardma::grep

#endif  // ARDMA_APPS_GREP_PCRE_PROGRAM_H_
