#include "apps/cc/cc_job.h"

#include "core/wire/byte_io.h"

namespace ardma::cc {

using wire::ByteReader;
using wire::ByteWriter;

namespace {
constexpr uint8_t kVersion = 1;
constexpr uint32_t kMaxFlags = 4096;
}  // namespace

std::string EncodeJob(const CompileJob& job) {
  std::string out;
  ByteWriter w(&out);
  w.U8(kVersion);
  w.Str16(job.compiler);
  w.U32(static_cast<uint32_t>(job.flags.size()));
  for (const std::string& f : job.flags) w.Str16(f);
  w.U8(static_cast<uint8_t>(job.kind));
  w.Str16(job.cwd);
  w.U32(job.source_region);
  w.U64(job.source_size);
  w.U32(job.object_region);
  w.U64(job.object_capacity);
  w.Str16(job.source_name);  // (absent from older submitters' jobs)
  return out;
}

absl::StatusOr<CompileJob> DecodeJob(std::string_view bytes) {
  ByteReader r(bytes);
  CompileJob job;
  uint8_t version, kind;
  uint32_t n;
  std::string_view s;
  auto bad = [] { return absl::InvalidArgumentError("malformed compile job"); };
  if (!r.U8(&version) || version != kVersion || !r.Str16(&s) || !r.U32(&n) || n > kMaxFlags) {
    return bad();
  }
  job.compiler = std::string(s);
  for (uint32_t i = 0; i < n; ++i) {
    if (!r.Str16(&s)) return bad();
    job.flags.emplace_back(s);
  }
  if (!r.U8(&kind) || kind > static_cast<uint8_t>(SourceKind::kAssembler) || !r.Str16(&s) ||
      !r.U32(&job.source_region) || !r.U64(&job.source_size) || !r.U32(&job.object_region) ||
      !r.U64(&job.object_capacity)) {
    return bad();
  }
  job.kind = static_cast<SourceKind>(kind);
  job.cwd = std::string(s);
  if (!r.AtEnd()) {
    std::string_view name;
    if (!r.Str16(&name) || !r.AtEnd() || name.find('/') != std::string_view::npos ||
        name == "." || name == "..") {
      return bad();
    }
    job.source_name = std::string(name);
  }
  return job;
}

std::string EncodeResult(const CompileResult& result) {
  std::string out;
  ByteWriter w(&out);
  w.U8(result.compiled ? 1 : 0);
  w.Bytes32(result.failure);
  w.U32(static_cast<uint32_t>(result.exit_code));
  w.Bytes32(result.out);
  w.Bytes32(result.err);
  w.U64(result.object_size);
  w.U64(result.compile_us);
  return out;
}

absl::StatusOr<CompileResult> DecodeResult(std::string_view bytes) {
  ByteReader r(bytes);
  CompileResult result;
  uint8_t compiled;
  uint32_t code;
  std::string_view failure, out, err;
  if (!r.U8(&compiled) || !r.Bytes32(&failure) || !r.U32(&code) || !r.Bytes32(&out) ||
      !r.Bytes32(&err) || !r.U64(&result.object_size) || !r.U64(&result.compile_us) || !r.AtEnd()) {
    return absl::DataLossError("malformed compile result");
  }
  result.compiled = compiled != 0;
  result.failure = std::string(failure);
  result.exit_code = static_cast<int>(code);
  result.out = std::string(out);
  result.err = std::string(err);
  return result;
}

}  // namespace ardma::cc
