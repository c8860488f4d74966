#include "core/active/native_loader.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "absl/strings/str_cat.h"
#include "core/active/elf_check.h"
#include "core/spawn_environment.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace ardma {
namespace {

std::string FdPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// dlclose, then give the memfd back — unless the object stays mapped (C++ libraries with
// STB_GNU_UNIQUE symbols cannot be unloaded). glibc finds loaded objects by the name they were
// opened with, so if fd N were reused for other code, dlopen("/proc/self/fd/N") would hand back
// this stale object. Such an fd is kept open for the life of the process.
void Unload(void* handle, int fd) {
  ::dlclose(handle);
  std::string path = FdPath(fd);
  if (void* resident = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(resident);
    return;
  }
  ::close(fd);
}

class NativeLibrary : public LoadedLibrary {
 public:
  NativeLibrary(int fd, void* handle, const FunctionTable* table)
      : fd_(fd), handle_(handle), table_(table) {}
  ~NativeLibrary() override { Unload(handle_, fd_); }
  std::string_view name() const override { return table_->library; }
  size_t num_functions() const override { return table_->count; }
  std::string_view function_name(size_t index) const override {
    return table_->entries[index].name;
  }
  absl::StatusOr<std::string> Run(size_t index, Context& ctx, std::string_view args) override {
    return table_->entries[index].fn(ctx, args);
  }

 private:
  const int fd_;
  void* const handle_;
  const FunctionTable* const table_;
};

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// What a library's entry point returned: a table this server can use, or why not. Reads every
// name, so a table pointing into the wild faults here (in the trial process).
absl::Status CheckTable(const FunctionTable* table) {
  if (table == nullptr) {
    return absl::InvalidArgumentError(
        "shared object has no ardma_active_library_v1 entry point (build it with "
        "ardma_active_library)");
  }
  if (table->abi_version != kActiveAbiVersion) {
    return absl::InvalidArgumentError(absl::StrCat("library built for active ABI ",
                                                   table->abi_version, ", server speaks ",
                                                   kActiveAbiVersion));
  }
  if (table->library == nullptr || table->library[0] == '\0') {
    return absl::InvalidArgumentError("library has no name");
  }
  if (table->count > 1u << 20 || (table->count > 0 && table->entries == nullptr)) {
    return absl::InvalidArgumentError("library's function table is damaged");
  }
  for (size_t i = 0; i < table->count; ++i) {
    if (table->entries[i].name == nullptr || table->entries[i].fn == nullptr ||
        table->entries[i].name[0] == '\0') {
      return absl::InvalidArgumentError("library's function table is damaged");
    }
  }
  return absl::OkStatus();
}

using Entry = const FunctionTable* (*)();

// dlopen's error, or the entry point's table checked.
absl::Status CheckLoaded(void* handle) {
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load shared object: ", err != nullptr ? err : "unknown error"));
  }
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ardma_active_library_v1"));
  return CheckTable(entry != nullptr ? entry() : nullptr);
}

// The library in the memfd `fd` mapped into this process: its handle (null if dlopen failed) and
// its table, or why it cannot be used.
struct Mapping {
  void* handle;
  absl::StatusOr<const FunctionTable*> table;
};
Mapping Map(int fd) {
  void* handle = ::dlopen(FdPath(fd).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (absl::Status problem = CheckLoaded(handle); !problem.ok()) return {handle, problem};
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ardma_active_library_v1"));
  return {handle, entry()};
}

// A library this process maps only when one of its functions first runs here (if `may_map`),
// known until then by the table its trial reported.
class DeferredLibrary : public LoadedLibrary {
 public:
  DeferredLibrary(int fd, NativeLoader::Table table, bool may_map)
      : fd_(fd), table_(std::move(table)), may_map_(may_map) {}
  ~DeferredLibrary() override {
    if (handle_ != nullptr) {
      Unload(handle_, fd_);
    } else {
      ::close(fd_);
    }
  }
  std::string_view name() const override { return table_.library; }
  size_t num_functions() const override { return table_.functions.size(); }
  std::string_view function_name(size_t index) const override { return table_.functions[index]; }
  absl::StatusOr<std::string> Run(size_t index, Context& ctx, std::string_view args) override {
    const FunctionTable* mapped = mapped_.load(std::memory_order_acquire);
    if (mapped == nullptr) {
      absl::StatusOr<const FunctionTable*> now = MapOnce();
      if (!now.ok()) return now.status();
      mapped = *now;
    }
    return mapped->entries[index].fn(ctx, args);
  }

 private:
  absl::StatusOr<const FunctionTable*> MapOnce() {
    absl::MutexLock lock(&mu_);
    if (const FunctionTable* t = mapped_.load(std::memory_order_relaxed)) return t;
    if (!failed_.ok()) return failed_;
    if (!may_map_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "library '", table_.library,
          "' runs only in isolated workers on this server (ardmad --isolate all), never in the "
          "server process"));
    }
    Mapping m = Map(fd_);
    handle_ = m.handle;
    if (!m.table.ok()) {
      failed_ = m.table.status();
      return failed_;
    }
    const FunctionTable& t = **m.table;
    bool same = t.library == table_.library && t.count == table_.functions.size();
    for (size_t i = 0; same && i < t.count; ++i) same = table_.functions[i] == t.entries[i].name;
    if (!same) {
      failed_ = absl::InvalidArgumentError(absl::StrCat(
          "library '", table_.library, "' has another function table in this process than in "
          "its trial load"));
      return failed_;
    }
    mapped_.store(*m.table, std::memory_order_release);
    return *m.table;
  }

  const int fd_;
  const NativeLoader::Table table_;
  const bool may_map_;
  std::atomic<const FunctionTable*> mapped_{nullptr};
  absl::Mutex mu_;
  void* handle_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

// A trial load runs in a process of its own first: this program started again (/proc/self/exe)
// with kTrialFdVariable naming the inherited memfd. Its constructor below loads the library, calls
// the entry point, checks the table, unloads it (running its destructors) and exits before main: 0
// when all went well, 2 with the reason on stderr (a pipe to the server) when the library was
// refused. A crash or a hang there costs the trial, not the server.
constexpr char kTrialFdVariable[] = "ARDMA_NATIVE_TRIAL_FD";
// The trial's sandbox::Policy (Encode), when it confines itself before loading.
constexpr char kTrialSandboxVariable[] = "ARDMA_NATIVE_TRIAL_SANDBOX";
// What the trial's SIGSYS handler writes on stderr before the forbidden call's number.
constexpr char kForbiddenMark[] = "\0ardma-forbidden-call:";
constexpr size_t kForbiddenMarkSize = sizeof(kForbiddenMark) - 1;
constexpr int kTrialFd = 3;
// Where a trial that loaded the library reports its table (TrialReport), for a server that does
// not load the library itself.
constexpr int kTrialReportFd = 4;
constexpr auto kTrialTimeout = std::chrono::seconds(10);
constexpr size_t kTrialMessageMax = 4096;
constexpr size_t kTrialReportMax = size_t{1} << 20;

// The table a trial found: the library's name, then its functions' names in order (a u32 count,
// then each name as str16).
std::string EncodeTable(const FunctionTable& table) {
  std::string out;
  wire::ByteWriter w(&out);
  w.Str16(table.library);
  w.U32(static_cast<uint32_t>(table.count));
  for (size_t i = 0; i < table.count; ++i) w.Str16(table.entries[i].name);
  return out;
}

absl::StatusOr<NativeLoader::Table> DecodeTable(std::string_view report) {
  wire::ByteReader r(report);
  NativeLoader::Table table;
  std::string_view library;
  uint32_t count = 0;
  bool ok = r.Str16(&library) && r.U32(&count) && count <= report.size();
  for (uint32_t i = 0; ok && i < count; ++i) {
    std::string_view name;
    ok = r.Str16(&name) && !name.empty();
    if (ok) table.functions.emplace_back(name);
  }
  if (!ok || library.empty() || !r.Rest().empty()) {
    return absl::InvalidArgumentError("cannot load shared object: its trial's report is damaged");
  }
  table.library = std::string(library);
  return table;
}

[[gnu::constructor]] void RunTrialLoadIfAsked() {
  const char* fd = std::getenv(kTrialFdVariable);
  if (fd == nullptr) return;
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // a library that crashes leaves no core file
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (const char* s = std::getenv(kTrialSandboxVariable); s != nullptr && *s != '\0') {
    absl::StatusOr<sandbox::Policy> policy = sandbox::Policy::Decode(s);
    std::string notes;
    absl::Status confined =
        policy.ok() ? sandbox::Enter(*policy, {2, std::string(kForbiddenMark, kForbiddenMarkSize)},
                                     &notes)
                    : policy.status();
    if (!confined.ok()) {
      std::string why = absl::StrCat("the trial load could not confine itself: ",
                                     confined.message());
      [[maybe_unused]] ssize_t n = ::write(2, why.data(), why.size());
      ::_exit(2);
    }
  }
  void* handle = ::dlopen(absl::StrCat("/proc/self/fd/", fd).c_str(), RTLD_NOW | RTLD_LOCAL);
  absl::Status checked = CheckLoaded(handle);
  if (checked.ok()) {
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ardma_active_library_v1"));
    std::string report = EncodeTable(*entry());
    for (std::string_view left = report; !left.empty();) {
      ssize_t n = ::write(kTrialReportFd, left.data(), left.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(3);
      left.remove_prefix(static_cast<size_t>(n));
    }
    ::dlclose(handle);  // its destructors run too: the server may unload it (--max-libraries)
    ::_exit(0);
  }
  absl::string_view why = checked.message().substr(0, kTrialMessageMax);
  [[maybe_unused]] ssize_t n = ::write(2, why.data(), why.size());
  ::_exit(2);
}

// What a trial process's end (`status` from waitpid, `why` what it wrote on stderr) says of the
// library.
absl::Status TrialVerdict(int status, const std::string& why) {
  if ((WIFEXITED(status) && WEXITSTATUS(status) == sandbox::kForbiddenExit) ||
      (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)) {
    std::string call = "(unknown)";
    if (size_t at = why.find(std::string(kForbiddenMark, kForbiddenMarkSize));
        at != std::string::npos && why.size() >= at + kForbiddenMarkSize + 4) {
      int nr;
      std::memcpy(&nr, why.data() + at + kForbiddenMarkSize, 4);
      call = sandbox::SyscallName(nr);
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot load shared object: loading it made a forbidden system call: ", call));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    return absl::InvalidArgumentError(why.substr(0, why.find('\0')));
  }
  if (WIFSIGNALED(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load shared object: loading it killed a trial process (",
                     ::strsignal(WTERMSIG(status)), ")"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load shared object: its code ended the trial process (status ",
                     WIFEXITED(status) ? WEXITSTATUS(status) : status, ")"));
  }
  return absl::OkStatus();
}

// A pipe whose read end does not block; both ends closed on exec.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) fd[0] = fd[1] = -1;
    if (fd[0] >= 0) ::fcntl(fd[0], F_SETFL, O_NONBLOCK);
  }
  ~Pipe() {
    CloseWriteEnd();
    if (fd[0] >= 0) ::close(fd[0]);
  }
  void CloseWriteEnd() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
  // Appends what is there now to *to, up to `max` bytes in all (the rest is read and dropped);
  // false if there was more than `max`.
  bool Drain(std::string* to, size_t max) {
    char buf[4096];
    ssize_t n;
    bool fits = true;
    while ((n = ::read(fd[0], buf, sizeof(buf))) > 0) {
      size_t room = max - std::min(max, to->size());
      fits = fits && static_cast<size_t>(n) <= room;
      to->append(buf, std::min(room, static_cast<size_t>(n)));
    }
    return fits;
  }
};

// Loads the library in a trial process: InvalidArgument when it was refused there or crashed or
// hung that process; otherwise what the trial reported of its table.
absl::StatusOr<std::string> TrialLoad(int code_fd, const std::optional<sandbox::Policy>& confine) {
  Pipe message, report;  // the trial's stderr (its reason, or the library's own output); its table
  if (message.fd[0] < 0 || report.fd[0] < 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  int fd = code_fd;
  // (dup2 onto itself would keep close-on-exec; each source must also lie above the targets)
  if (fd <= kTrialReportFd) fd = ::fcntl(code_fd, F_DUPFD_CLOEXEC, kTrialReportFd + 1);
  int report_fd = ::fcntl(report.fd[1], F_DUPFD_CLOEXEC, kTrialReportFd + 1);
  ::posix_spawn_file_actions_adddup2(&actions, message.fd[1], 2);
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, fd, kTrialFd);
  ::posix_spawn_file_actions_adddup2(&actions, report_fd, kTrialReportFd);
  std::string policy;
  if (confine) {
    sandbox::Policy p = *confine;
    p.keep_fds = {kTrialFd, kTrialReportFd};
    policy = p.Encode();
  }
  SpawnEnvironment env(
      {{kTrialFdVariable, absl::StrCat(kTrialFd)}, {kTrialSandboxVariable, std::move(policy)}});
  char name[] = "ardma-trial-load";
  char* argv[] = {name, nullptr};
  pid_t pid = -1;
  int spawned = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, env.get());
  ::posix_spawn_file_actions_destroy(&actions);
  if (fd != code_fd) ::close(fd);
  ::close(report_fd);
  message.CloseWriteEnd();
  report.CloseWriteEnd();
  if (spawned != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start the trial load process: ", std::strerror(spawned)));
  }
  std::string why, table;
  bool table_fits = true;
  auto drain = [&] {
    message.Drain(&why, kTrialMessageMax);
    table_fits = report.Drain(&table, kTrialReportMax) && table_fits;
  };
  auto give_up = std::chrono::steady_clock::now() + kTrialTimeout;
  auto pause = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waiting for the trial load: ", std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() > give_up) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load shared object: loading it did not finish within ",
                       std::chrono::duration_cast<std::chrono::seconds>(kTrialTimeout).count(),
                       " s in a trial process"));
    }
    drain();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20'000));
  }
  drain();
  ARDMA_RETURN_IF_ERROR(TrialVerdict(status, why));
  if (!table_fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot load shared object: its function table is longer than ", kTrialReportMax,
        " bytes"));
  }
  return table;
}

}  // namespace

absl::StatusOr<NativeLoader::Vetted> NativeLoader::Vet(std::string_view code) const {
  if (code.size() < 4 || std::memcmp(code.data(),
                                     "\x7f"
                                     "ELF",
                                     4) != 0) {
    return absl::InvalidArgumentError("native code must be an ELF shared object");
  }
  if (absl::Status s = CheckElf(code); !s.ok()) return s;
  int fd = ::memfd_create("ardma-active-code", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (!WriteAll(fd, code)) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("writing code to memfd: ", std::strerror(errno)));
  }
  Vetted vetted{fd, ""};
  if (trial_) {
    absl::StatusOr<std::string> report = TrialLoad(fd, trial_sandbox_);
    if (!report.ok()) {
      ::close(fd);
      return report.status();
    }
    vetted.report = *std::move(report);
  }
  return vetted;
}

absl::Status NativeLoader::Check(std::string_view code) const {
  absl::StatusOr<Vetted> vetted = Vet(code);
  if (vetted.ok()) ::close(vetted->fd);
  return vetted.status();
}

absl::StatusOr<std::unique_ptr<LoadedLibrary>> NativeLoader::Load(std::string_view library_name,
                                                                  std::string_view code) {
  ARDMA_ASSIGN_OR_RETURN(Vetted vetted, Vet(code));
  const int fd = vetted.fd;
  InProcess in_process = in_process_.load(std::memory_order_relaxed);
  if (in_process != InProcess::kAtLoad) {
    absl::StatusOr<Table> table = DecodeTable(vetted.report);
    if (!table.ok()) {
      ::close(fd);
      return table.status();
    }
    return std::make_unique<DeferredLibrary>(fd, *std::move(table),
                                             in_process == InProcess::kOnFirstRun);
  }
  Mapping m = Map(fd);
  if (!m.table.ok()) {
    if (m.handle != nullptr) {
      Unload(m.handle, fd);
    } else {
      ::close(fd);
    }
    return m.table.status();
  }
  return std::make_unique<NativeLibrary>(fd, m.handle, *m.table);
}

}  // namespace ardma
