#define PCRE2_CODE_UNIT_WIDTH 8
#include "apps/grep/pcre_program.h"

#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace ardma::grep {

absl::StatusOr<std::shared_ptr<PcreProgram>> PcreProgram::Compile(std::string_view pattern,
                                                                  bool ignore_case) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   ignore_case ? PCRE2_CASELESS : 0, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where there is no JIT, the interpreter runs
  std::shared_ptr<PcreProgram> program(new PcreProgram());
  program->code_ = code;
  program->match_data_ = pcre2_match_data_create_from_pattern(code, nullptr);
  if (program->match_data_ == nullptr) return absl::ResourceExhaustedError("pcre2: out of memory");
  return program;
}

PcreProgram::~PcreProgram() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
  pcre2_code_free(static_cast<pcre2_code*>(code_));
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
