#include "apps/cc/ccd.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "apps/cc/subprocess.h"
#include "core/log.h"
#include "core/security/auth.h"
#include "core/status_macros.h"
#include "services/cc/cc_client.h"

namespace ardma::cc {
namespace {

constexpr uint64_t kChunk = 16 << 20;  // bytes per READ / WRITE (well under a frame's limit)
constexpr absl::Duration kTakeWait = absl::Seconds(5);

CompileResult Failed(std::string why) {
  CompileResult r;
  r.compiled = false;
  r.failure = std::move(why);
  return r;
}

struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};
struct TempDir {  // (declared before the files in it: removed after them)
  std::string path;
  ~TempDir() {
    if (!path.empty()) ::rmdir(path.c_str());
  }
};

}  // namespace

absl::StatusOr<std::set<std::string>> ParseAllowList(std::string_view list) {
  std::set<std::string> out;
  for (absl::string_view name : absl::StrSplit(ToAbsl(list), ',', absl::SkipEmpty())) {
    if (name.find('/') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow takes compiler names found on PATH, not paths: '", std::string(name), "'"));
    }
    out.emplace(name);
  }
  if (out.empty()) return absl::InvalidArgumentError("--allow names no compiler");
  return out;
}

Slave::Slave(Client* client, SlaveOptions options)
    : client_(client), options_(std::move(options)) {}

CompileResult Slave::Compile(const CompileJob& job) {
  std::string base = job.compiler.substr(job.compiler.rfind('/') + 1);
  if (!options_.allow.contains(base)) {
    return Failed(
        absl::StrCat("compiler '", job.compiler, "' is not allowed on slave ", options_.name));
  }
  std::string stem =
      absl::StrCat(options_.tmpdir, "/ardma-ccd-", ::getpid(), "-", security::RandomU64());
  const CompilerFamily family = FamilyOf(job.compiler).value_or(CompilerFamily::kGcc);
  // clang names the object's FILE symbol after the file it compiles (its base name): the source
  // gets the input's name, in a directory of its own.
  const bool named = family == CompilerFamily::kClang && !job.source_name.empty();
  TempDir dir{named ? stem : ""};
  if (named && ::mkdir(stem.c_str(), 0700) != 0) {
    return Failed(absl::StrCat("making ", stem, ": ", std::strerror(errno)));
  }
  TempFile source{named ? stem + "/" + job.source_name : stem + ShippedSuffix(job.kind)},
      object{stem + ".o"};
  {
    // The source, READ from the submitter's region (one-sided over UCX).
    std::ofstream out(source.path, std::ios::binary);
    for (uint64_t at = 0; at < job.source_size; at += kChunk) {
      uint32_t len = static_cast<uint32_t>(std::min(kChunk, job.source_size - at));
      absl::StatusOr<std::string> bytes = client_->Read(at, len, job.source_region);
      if (!bytes.ok())
        return Failed(absl::StrCat("reading the source: ", bytes.status().message()));
      out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    }
    if (!out.flush()) return Failed(absl::StrCat("writing ", source.path));
  }
  std::vector<std::string> argv{base};
  argv.insert(argv.end(), job.flags.begin(), job.flags.end());
  for (std::string& f : RemoteLanguageFlags(job.kind, family)) argv.push_back(std::move(f));
  argv.insert(argv.end(), {"-c", source.path, "-o", object.path});
  // In the submitter's directory where it exists here (diagnostics quote source lines from it),
  // else in the temporary directory.
  std::error_code ec;
  std::string cwd = std::filesystem::is_directory(job.cwd, ec) ? job.cwd : options_.tmpdir;
  absl::Time start = absl::Now();
  absl::StatusOr<ProcessResult> run = RunCaptured(argv, cwd);
  if (!run.ok()) return Failed(std::string(run.status().message()));
  CompileResult result;
  result.compile_us = static_cast<uint64_t>(absl::ToInt64Microseconds(absl::Now() - start));
  if (WIFSIGNALED(run->wait_status)) {
    return Failed(absl::StrCat(base, " was killed by signal ", WTERMSIG(run->wait_status)));
  }
  result.compiled = true;
  result.exit_code = ExitCode(run->wait_status);
  result.out = std::move(run->out);
  result.err = std::move(run->err);
  if (result.exit_code != 0) return result;
  // The object, WRITTEN into the submitter's region (one-sided over UCX).
  std::ifstream in(object.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() > job.object_capacity) {
    return Failed(absl::StrCat("the object (", bytes.size(), " bytes) is larger than its region (",
                               job.object_capacity, " bytes; ARDMA_CC_OBJECT_MAX)"));
  }
  for (uint64_t at = 0; at < bytes.size(); at += kChunk) {
    std::string_view part = std::string_view(bytes).substr(at, kChunk);
    absl::Status written = client_->Write(at, part, job.object_region);
    if (!written.ok()) return Failed(absl::StrCat("writing the object: ", written.message()));
  }
  result.object_size = bytes.size();
  return result;
}

absl::Status Slave::Serve() {
  CcClient farm(client_);
  while (!stopping_.load()) {
    absl::StatusOr<std::optional<Job>> taken = farm.Take(options_.name, kTakeWait);
    if (!taken.ok()) {
      if (taken.status().code() == absl::StatusCode::kInvalidArgument ||
          taken.status().code() == absl::StatusCode::kPermissionDenied) {
        return taken.status();
      }
      ARDMA_LOG(kWarning, "taking a job: %s (retrying)", taken.status().ToString());
      absl::SleepFor(absl::Seconds(1));  // the client reconnects on the next call
      continue;
    }
    if (!taken->has_value()) continue;
    const Job& job = **taken;
    absl::StatusOr<CompileJob> decoded = DecodeJob(job.descriptor);
    if (options_.compile_slots != nullptr) options_.compile_slots->Acquire();
    CompileResult result = decoded.ok() ? Compile(*decoded) : Failed("a malformed job");
    if (options_.compile_slots != nullptr) options_.compile_slots->Release();
    if (options_.verbose) {
      ARDMA_LOG(kInfo, "job %016x: %s", job.id,
                result.compiled ? absl::StrCat("exit ", result.exit_code, ", object ",
                                               result.object_size, " bytes")
                                : result.failure);
    }
    absl::StatusOr<bool> finished =
        farm.Finish(job.id, options_.name, !result.compiled, EncodeResult(result));
    if (!finished.ok() && finished.status().code() != absl::StatusCode::kNotFound) {
      ARDMA_LOG(kWarning, "finishing job %016x: %s", job.id, finished.status().ToString());
    }
    if (decoded.ok()) {
      client_->ForgetRegion(decoded->source_region);
      client_->ForgetRegion(decoded->object_region);
    }
  }
  return absl::OkStatus();
}

absl::Status Slave::Run() {
  int slots = options_.slots > 0
                  ? options_.slots
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  std::vector<absl::Status> ended(static_cast<size_t>(slots));
  for (int i = 0; i < slots; ++i) {
    threads.emplace_back([this, &ended, i] {
      ended[static_cast<size_t>(i)] = Serve();
      Stop();  // a slot that cannot go on stops them all
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : ended) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ardma::cc
