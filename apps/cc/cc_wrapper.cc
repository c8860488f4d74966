#include "apps/cc/cc_wrapper.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "apps/cc/cc_args.h"
#include "apps/cc/cc_job.h"
#include "apps/cc/subprocess.h"
#include "core/client/client.h"
#include "core/memory/region.h"
#include "core/security/auth.h"
#include "core/status_macros.h"
#include "services/cc/cc_client.h"

namespace ardma::cc {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// The two tmpfs files of one remote compile, removed when done.
struct TempFiles {
  std::string source, object;
  ~TempFiles() {
    if (!source.empty()) ::unlink(source.c_str());
    if (!object.empty()) ::unlink(object.c_str());
  }
};

absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Copies `size` bytes of file `from` to a new file `to` (what a compile's -o would have made).
absl::Status CopyOut(const std::string& from, uint64_t size, const std::string& to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return ErrnoError(absl::StrCat("open ", from));
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (out < 0) {
    absl::Status s = ErrnoError(absl::StrCat("open ", to));
    ::close(in);
    return s;
  }
  absl::Status status;
  bool in_kernel = true;  // copy_file_range, until it cannot (across file systems: EXDEV)
  std::string buf;
  for (uint64_t left = size; left > 0;) {
    ssize_t n;
    if (in_kernel) {
      n = ::copy_file_range(in, nullptr, out, nullptr, left, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
        in_kernel = false;
        continue;
      }
    } else {
      buf.resize(std::min<uint64_t>(left, 1 << 20));
      n = ::read(in, buf.data(), buf.size());
      if (n > 0 && ::write(out, buf.data(), static_cast<size_t>(n)) != n) n = -1;
    }
    if (n <= 0) {
      status = n == 0 ? absl::DataLossError(absl::StrCat(from, " is short"))
                      : ErrnoError(absl::StrCat("write ", to));
      break;
    }
    left -= static_cast<uint64_t>(n);
  }
  ::close(in);
  if (::close(out) != 0 && status.ok()) status = ErrnoError(absl::StrCat("write ", to));
  return status;
}

// This process's CPU and its children's (the preprocessor), for the log: the rdistcc paper's Table 2.
std::string CpuSpent() {
  auto us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000 + r.ru_utime.tv_usec +
           r.ru_stime.tv_usec;
  };
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  return absl::StrCat("self_cpu_us=", us(self), " cpp_cpu_us=", us(children));
}

void Log(const WrapperSettings& s, const std::string& line) {
  if (s.log.empty()) return;
  std::ofstream(s.log, std::ios::app) << line << '\n';
}

// The remote compile; an error means "compile locally instead" (its message is the warning).
// Otherwise the compiler's outcome, already printed; the object is in place when it succeeded.
absl::StatusOr<int> CompileOnFarm(const CompilePlan& plan, const WrapperSettings& settings) {
  // Connected first: with no server the compile runs here before anything was printed.
  ClientOptions options;
  options.connect_timeout = absl::Seconds(2);
  options.connect_attempts = 2;
  // The submitter itself moves no data (the slave READs and WRITEs its regions one-sidedly): it
  // registers and waits, which costs least over the stream transport (a blocking wait; a UCX
  // session is ~0.2 s of CPU to set up and poll). So ucx://ADDR is reached at ADDR.
  std::string server = settings.server;
  if (server.starts_with("ucx://")) server = server.substr(6);
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(server, options));
  std::error_code ec;
  std::filesystem::create_directories(settings.dir, ec);
  TempFiles files;
  std::string stem = absl::StrCat(settings.dir, "/", ::getpid(), "-", security::RandomU64());
  files.source = stem + ShippedSuffix(plan.kind);
  files.object = stem + ".o";
  // The local step writes straight into the file the slave reads: no copy on this side.
  if (!plan.preprocess.empty()) {
    std::vector<std::string> cpp = plan.preprocess;
    cpp.insert(cpp.end(), {"-o", files.source});
    ARDMA_ASSIGN_OR_RETURN(int status, RunInherited(cpp));
    // Preprocessing failed: that is the compile's own failure, already printed.
    if (status != 0) return ExitCode(status);
  } else {
    std::filesystem::copy_file(plan.input, files.source, ec);
    if (ec) return absl::NotFoundError(absl::StrCat(plan.input, ": ", ec.message()));
  }
  struct stat st;
  if (::stat(files.source.c_str(), &st) != 0) return ErrnoError(files.source);
  uint64_t source_size = static_cast<uint64_t>(st.st_size);
  if (source_size == 0) return absl::FailedPreconditionError("the preprocessed source is empty");
  {
    // Sparse: tmpfs gives it pages only as the slave writes them.
    int fd = ::open(files.object.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoError(files.object);
    int rc = ::ftruncate(fd, static_cast<off_t>(settings.object_capacity));
    ::close(fd);
    if (rc != 0) return ErrnoError(files.object);
  }

  ARDMA_ASSIGN_OR_RETURN(wire::UcxRegionKey source,
                         client->RegisterFile(files.source, /*writable=*/false));
  ARDMA_ASSIGN_OR_RETURN(wire::UcxRegionKey object,
                         client->RegisterFile(files.object, /*writable=*/true));
  CompileJob job;
  job.compiler = plan.compiler;
  job.flags = plan.remote_flags;
  job.kind = plan.kind;
  job.cwd = std::filesystem::current_path(ec).string();
  job.source_region = source.region;
  job.source_size = source_size;
  job.object_region = object.region;
  job.object_capacity = object.size;
  job.source_name = plan.input.substr(plan.input.rfind('/') + 1);
  uint64_t id = security::RandomU64();
  ARDMA_ASSIGN_OR_RETURN(std::string answer,
                         CcClient(client.get()).Submit(id, EncodeJob(job), settings.timeout));
  if (answer.empty()) return absl::AbortedError("the job was withdrawn");
  ARDMA_ASSIGN_OR_RETURN(CompileResult result, DecodeResult(answer));
  if (!result.compiled) return absl::UnavailableError(result.failure);
  if (result.exit_code == 0) {
    ARDMA_RETURN_IF_ERROR(CopyOut(files.object, result.object_size, plan.output));
  } else {
    ::unlink(plan.output.c_str());  // as the compiler leaves no object behind a failure
  }
  std::cout << result.out << std::flush;
  std::cerr << result.err << std::flush;
  Log(settings, absl::StrCat("remote ", plan.input, " source=", source_size,
                             " object=", result.object_size, " copied=", result.object_size,
                             " compile_us=", result.compile_us, " ", CpuSpent()));
  return result.exit_code;
}

int CompileLocally(const std::vector<std::string>& args, const WrapperSettings& settings,
                   const std::string& why) {
  Log(settings, absl::StrCat("local ", why));
  absl::StatusOr<int> status = RunInherited(args);
  if (!status.ok()) {
    std::cerr << "ardma-cc: " << status.status().message() << "\n";
    return 127;
  }
  return ExitCode(*status);
}

}  // namespace

WrapperSettings SettingsFromEnvironment() {
  WrapperSettings s;
  if (const char* v = Env("ARDMA_SERVER")) s.server = v;
  if (const char* v = Env("ARDMA_CC_DIR")) s.dir = v;
  if (const char* v = Env("ARDMA_CC_TIMEOUT")) {
    double seconds;
    if (absl::SimpleAtod(v, &seconds) && seconds > 0) s.timeout = absl::Seconds(seconds);
  }
  if (const char* v = Env("ARDMA_CC_OBJECT_MAX")) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(v);
    if (bytes.ok() && *bytes > 0) s.object_capacity = *bytes;
  }
  s.verbose = Env("ARDMA_CC_VERBOSE") != nullptr;
  s.local = Env("ARDMA_CC_LOCAL") != nullptr;
  if (const char* v = Env("ARDMA_CC_LOG")) s.log = v;
  return s;
}

int RunWrapper(const std::vector<std::string>& args, const WrapperSettings& settings) {
  CompilePlan plan = PlanCompile(args);
  if (settings.local) plan = {.remote = false, .local_reason = "ARDMA_CC_LOCAL is set"};
  if (!plan.remote) {
    if (settings.verbose) std::cerr << "ardma-cc: local: " << plan.local_reason << "\n";
    return CompileLocally(args, settings, plan.local_reason);
  }
  absl::StatusOr<int> remote = CompileOnFarm(plan, settings);
  if (remote.ok()) {
    if (settings.verbose) std::cerr << "ardma-cc: compiled " << plan.input << " on the farm\n";
    return *remote;
  }
  // As distcc: one warning line, then the compile runs here.
  std::cerr << "ardma-cc: warning: " << plan.input << ": " << remote.status().message()
            << "; compiling locally\n";
  return CompileLocally(args, settings, std::string(remote.status().message()));
}

}  // namespace ardma::cc
