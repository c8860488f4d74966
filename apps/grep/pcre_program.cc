#define PCRE2_CODE_UNIT_WIDTH 8
#include "apps/grep/pcre_program.h"

#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma::grep {

namespace {

absl::StatusOr<pcre2_code*> CompileCode(std::string_view pattern, uint32_t flags) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   flags, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where there is no JIT, the interpreter runs
  return code;
}

// LongestAt's callout: notes where a match would end, then fails it so that the matcher tries
// every other way.
struct Longest {
  size_t end = 0;  // matches must end by here
  bool found = false;
  size_t best = 0;
};

int NoteEnd(pcre2_callout_block* block, void* data) {
  auto* longest = static_cast<Longest*>(data);
  size_t at = block->current_position;
  if (at <= longest->end && (!longest->found || at > longest->best)) {
    longest->best = at;
    longest->found = true;
  }
  return 1;  // no match here: backtrack
}

}  // namespace

absl::StatusOr<std::shared_ptr<PcreProgram>> PcreProgram::Compile(std::string_view pattern,
                                                                  bool ignore_case, bool posix,
                                                                  bool dot_all) {
  uint32_t flags = (ignore_case ? PCRE2_CASELESS : 0) | (dot_all ? PCRE2_DOTALL : 0) |
                   (posix ? PCRE2_DOLLAR_ENDONLY : 0);
  std::shared_ptr<PcreProgram> program(new PcreProgram());
  ARDMA_ASSIGN_OR_RETURN(pcre2_code * code, CompileCode(pattern, flags));
  program->code_ = code;
  program->match_data_ = pcre2_match_data_create_from_pattern(code, nullptr);
  if (program->match_data_ == nullptr) return absl::ResourceExhaustedError("pcre2: out of memory");
  if (posix) {
    // (Auto-possessification would skip ways to match that end elsewhere.)
    ARDMA_ASSIGN_OR_RETURN(
        pcre2_code * longest,
        CompileCode("(?:" + std::string(pattern) + ")(?C1)", flags | PCRE2_NO_AUTO_POSSESS));
    program->longest_code_ = longest;
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    if (context == nullptr) return absl::ResourceExhaustedError("pcre2: out of memory");
    program->match_context_ = context;
  }
  return program;
}

PcreProgram::~PcreProgram() {
  pcre2_match_context_free(static_cast<pcre2_match_context*>(match_context_));
  pcre2_code_free(static_cast<pcre2_code*>(longest_code_));
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool PcreProgram::LongestAt(std::string_view text, size_t start, size_t end,
                            size_t* length) const {
  if (longest_code_ == nullptr) return false;
  Longest longest;
  longest.end = end;
  auto* context = static_cast<pcre2_match_context*>(match_context_);
  pcre2_set_callout(context, &NoteEnd, &longest);
  PCRE2_SPTR subject = reinterpret_cast<PCRE2_SPTR>(text.data() != nullptr ? text.data() : "");
  // Always "no match" (the callout fails every one), or a limit: then what was found so far.
  pcre2_match(static_cast<pcre2_code*>(longest_code_), subject, text.size(), start,
              PCRE2_ANCHORED, static_cast<pcre2_match_data*>(match_data_), context);
  if (!longest.found) return false;
  *length = longest.best - start;
  return true;
}

bool PcreProgram::Find(std::string_view text, size_t pos, size_t* start, size_t* length) const {
  auto* data = static_cast<pcre2_match_data*>(match_data_);
  // An empty text still needs a valid pointer.
  PCRE2_SPTR subject = reinterpret_cast<PCRE2_SPTR>(text.data() != nullptr ? text.data() : "");
  int rc =
      pcre2_match(static_cast<pcre2_code*>(code_), subject, text.size(), pos, 0, data, nullptr);
  if (rc < 0) return false;  // no match (or a match limit: GNU grep reports it; see docs)
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
  *start = ov[0];
  *length = ov[1] >= ov[0] ? ov[1] - ov[0] : 0;
  return true;
}

}  // namespace ardma::grep
