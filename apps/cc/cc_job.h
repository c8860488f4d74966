// What ardma-cc hands the farm (a job descriptor, opaque to the queue) and what a slave answers.
#ifndef ARDMA_APPS_CC_CC_JOB_H_
#define ARDMA_APPS_CC_CC_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/cc/cc_args.h"
#include "core/context/context.h"

namespace ardma::cc {

struct CompileJob {
  std::string compiler;  // as the user named it; the slave runs it only if its base name is allowed
  std::vector<std::string> flags;  // CompilePlan::remote_flags
  SourceKind kind = SourceKind::kC;
  std::string cwd;  // the submitter's working directory (for diagnostics' source lines)
  RegionId source_region = 0;
  uint64_t source_size = 0;
  RegionId object_region = 0;
  uint64_t object_capacity = 0;
  // The input's base name ("a.c"): clang names the object's FILE symbol after the file it
  // compiles, so the slave gives the shipped source this name. Empty from older submitters.
  std::string source_name;
};

struct CompileResult {
  // False: the farm could not compile it (compiler not allowed, source unreadable, object too
  // large, the compiler killed by a signal): the submitter compiles locally; `failure` says why.
  bool compiled = false;
  std::string failure;
  int exit_code = 0;  // the compiler's
  std::string out, err;
  uint64_t object_size = 0;  // bytes written to the object region (exit code 0)
  uint64_t compile_us = 0;   // the compiler's run on the slave
};

std::string EncodeJob(const CompileJob& job);
absl::StatusOr<CompileJob> DecodeJob(std::string_view bytes);
std::string EncodeResult(const CompileResult& result);
absl::StatusOr<CompileResult> DecodeResult(std::string_view bytes);

}  // namespace ardma::cc

#endif  // ARDMA_APPS_CC_CC_JOB_H_
