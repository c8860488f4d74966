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

#include "absl/strings/str_cat.h"
#include "core/active/elf_check.h"
#include "core/spawn_environment.h"

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
constexpr auto kTrialTimeout = std::chrono::seconds(10);
constexpr size_t kTrialMessageMax = 4096;

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

// Loads the library in a trial process: InvalidArgument when it was refused there or crashed or
// hung that process.
absl::Status TrialLoad(int code_fd, const std::optional<sandbox::Policy>& confine) {
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  int fd = code_fd;
  if (fd == kTrialFd) fd = ::fcntl(code_fd, F_DUPFD_CLOEXEC, kTrialFd + 1);  // dup2 onto itself
  ::posix_spawn_file_actions_adddup2(&actions, fd, kTrialFd);  // would keep close-on-exec
  int message[2];
  if (::pipe2(message, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::posix_spawn_file_actions_destroy(&actions);
    if (fd != code_fd) ::close(fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, message[1], 2);
  std::string policy;
  if (confine) {
    sandbox::Policy p = *confine;
    p.keep_fds = {kTrialFd};
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
  ::close(message[1]);
  std::string why;  // what the trial wrote on stderr (its reason, or the library's own output)
  auto drain = [&] {
    char buf[1024];
    ssize_t n;
    while ((n = ::read(message[0], buf, sizeof(buf))) > 0) {
      if (why.size() < kTrialMessageMax) why.append(buf, static_cast<size_t>(n));
    }
  };
  struct CloseMessage {
    int fd;
    ~CloseMessage() { ::close(fd); }
  } close_message{message[0]};
  if (spawned != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start the trial load process: ", std::strerror(spawned)));
  }
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
  return TrialVerdict(status, why);
}

}  // namespace

absl::StatusOr<int> NativeLoader::Vet(std::string_view code) const {
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
  if (absl::Status trial = trial_ ? TrialLoad(fd, trial_sandbox_) : absl::OkStatus();
      !trial.ok()) {
    ::close(fd);
    return trial;
  }
  return fd;
}

absl::Status NativeLoader::Check(std::string_view code) const {
  absl::StatusOr<int> fd = Vet(code);
  if (fd.ok()) ::close(*fd);
  return fd.status();
}

absl::StatusOr<std::unique_ptr<LoadedLibrary>> NativeLoader::Load(std::string_view library_name,
                                                                  std::string_view code) {
  absl::StatusOr<int> vetted = Vet(code);
  if (!vetted.ok()) return vetted.status();
  const int fd = *vetted;
  std::string path = FdPath(fd);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (absl::Status problem = CheckLoaded(handle); !problem.ok()) {
    if (handle != nullptr) {
      Unload(handle, fd);
    } else {
      ::close(fd);
    }
    return problem;
  }
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ardma_active_library_v1"));
  return std::make_unique<NativeLibrary>(fd, handle, entry());
}

}  // namespace ardma
