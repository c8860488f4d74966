#include "core/active/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ardma::sandbox {
namespace {

// ---- The SIGSYS report ----

constexpr size_t kMaxPrefix = 64;
char g_report[kMaxPrefix + 4];
size_t g_prefix_len = 0;
int g_report_fd = -1;

void OnForbidden(int, siginfo_t* info, void*) {
  int nr = info->si_syscall;
  std::memcpy(g_report + g_prefix_len, &nr, 4);
  [[maybe_unused]] long n = ::syscall(SYS_write, g_report_fd, g_report, g_prefix_len + 4);
  ::syscall(SYS_exit_group, kForbiddenExit);
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// ---- Steps ----

absl::Status SetLimit(int resource, rlim_t soft, rlim_t hard, const char* what) {
  rlimit limit{soft, hard};
  if (::setrlimit(resource, &limit) != 0) return Errno(absl::StrCat("setrlimit ", what));
  return absl::OkStatus();
}

absl::Status SetLimits(const Policy& policy) {
  if (absl::Status s = SetLimit(RLIMIT_CORE, 0, 0, "RLIMIT_CORE"); !s.ok()) return s;
  if (policy.address_space != 0) {
    rlim_t as = policy.address_space;
    if (absl::Status s = SetLimit(RLIMIT_AS, as, as, "RLIMIT_AS"); !s.ok()) return s;
  }
  if (policy.cpu_seconds != 0) {
    // SIGXCPU at the soft limit, SIGKILL a little later if that was caught.
    rlim_t cpu = policy.cpu_seconds;
    if (absl::Status s = SetLimit(RLIMIT_CPU, cpu, cpu + 5, "RLIMIT_CPU"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void CloseOthers(std::vector<int> keep) {
  keep.push_back(2);
  std::sort(keep.begin(), keep.end());
  unsigned first = 3;
  for (int fd : keep) {
    if (fd < 3) continue;
    if (static_cast<unsigned>(fd) > first) ::syscall(SYS_close_range, first, fd - 1, 0);
    first = static_cast<unsigned>(fd) + 1;
  }
  ::syscall(SYS_close_range, first, ~0u, 0);
}

absl::Status DropUser(const User& user) {
  if (::setgroups(0, nullptr) != 0) return Errno("setgroups");
  if (::setresgid(user.gid, user.gid, user.gid) != 0) return Errno("setresgid");
  if (::setresuid(user.uid, user.uid, user.uid) != 0) return Errno("setresuid");
  uid_t r, e, s;
  if (::getresuid(&r, &e, &s) != 0 || r != user.uid || e != user.uid || s != user.uid) {
    return absl::InternalError(absl::StrCat("still not user ", user.name, " after setresuid"));
  }
  return absl::OkStatus();
}

// Landlock, with the kernel's ABI (the headers may be older than the kernel).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
constexpr uint64_t kReadOnly =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;

int LandlockAbi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

absl::Status Landlock(const Policy& policy, std::string* notes) {
  int abi = LandlockAbi();
  if (abi == 0) {
    absl::StrAppend(notes, "this kernel has no Landlock: files the user may open stay open to it");
    return absl::OkStatus();
  }
  // Every file-system right this ABI knows (v1: 13, v2: REFER, v3: TRUNCATE, v5: IOCTL_DEV), TCP
  // bind and connect (v4), and signals and abstract sockets outside the sandbox (v6).
  RulesetAttr attr{};
  attr.handled_access_fs = (uint64_t{1} << (abi == 1 ? 13 : abi == 2 ? 14 : abi < 5 ? 15 : 16)) - 1;
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = 3;
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = 3;
    size = sizeof(attr);
  }
  long ruleset = ::syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0) return Errno("landlock_create_ruleset");
  int fd = static_cast<int>(ruleset);
  for (const std::string& dir : policy.readable) {
    int parent = ::open(dir.c_str(), O_PATH | O_CLOEXEC);
    if (parent < 0) continue;  // not on this machine
    landlock_path_beneath_attr beneath{kReadOnly, parent};
    long added = ::syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    ::close(parent);
    if (added != 0) {
      ::close(fd);
      return Errno(absl::StrCat("landlock_add_rule ", dir));
    }
  }
  long restricted = ::syscall(SYS_landlock_restrict_self, fd, 0);
  ::close(fd);
  if (restricted != 0) return Errno("landlock_restrict_self");
  return absl::OkStatus();
}

// The allow-lists. Names, so that a call missing on this architecture is skipped.
constexpr const char* kNativeCalls[] = {
    "read", "write", "readv", "writev", "pread64", "recvfrom", "recvmsg", "sendto", "sendmsg",
    "close", "fstat", "newfstatat", "lseek", "fcntl", "ftruncate", "munmap", "mprotect",
    "mremap", "madvise", "brk", "futex", "clock_gettime", "clock_getres", "clock_nanosleep",
    "nanosleep", "gettimeofday", "time", "sched_yield", "getpid", "gettid", "getppid", "getuid",
    "geteuid", "getgid", "getegid", "getrlimit", "getrusage", "uname", "rt_sigprocmask",
    "rt_sigreturn", "sigaltstack", "restart_syscall", "exit", "exit_group", "getrandom",
    "memfd_create", "sched_getaffinity", "set_robust_list", "rseq"};
// What a JVM's threads need beyond that: threads (clone below), scheduling and memory queries,
// and reading its own files (Landlock allows only the JDK and the system's libraries).
constexpr const char* kJvmCalls[] = {
    "set_tid_address", "sched_getparam", "sched_getscheduler", "sched_setaffinity", "getcwd",
    "readlink", "readlinkat", "access", "faccessat", "faccessat2", "stat", "lstat", "statx",
    "getdents64", "poll", "ppoll", "sysinfo", "mincore", "dup", "dup2", "dup3", "pipe2",
    "eventfd2", "times", "getpriority", "setpriority", "membarrier", "open", "fstatfs", "statfs",
    "openat", "mmap"};

absl::Status Seccomp(const Policy& policy) {
  scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_TRAP);
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  struct Release {
    scmp_filter_ctx ctx;
    ~Release() { ::seccomp_release(ctx); }
  } release{ctx};
  // A call in another architecture's numbering (int 0x80 on x86-64) ends the process at once.
  int rc = ::seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  auto allow = [&](const char* name) {
    int nr = ::seccomp_syscall_resolve_name(name);
    if (nr != __NR_SCMP_ERROR && rc == 0) rc = ::seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
  };
  for (const char* name : kNativeCalls) allow(name);
  const auto self = static_cast<scmp_datum_t>(::getpid());
  auto rule = [&](uint32_t action, int nr, scmp_arg_cmp cmp) {
    if (rc == 0) rc = ::seccomp_rule_add(ctx, action, nr, 1, cmp);
  };
  // Signals: handlers for anything but SIGSYS; only to itself.
  rule(SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), SCMP_A0(SCMP_CMP_NE, SIGSYS));
  rule(SCMP_ACT_ALLOW, SCMP_SYS(kill), SCMP_A0(SCMP_CMP_EQ, self));
  rule(SCMP_ACT_ALLOW, SCMP_SYS(tgkill), SCMP_A0(SCMP_CMP_EQ, self));
  // Its own limits, read only; isatty on its output.
  rule(SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), SCMP_A2(SCMP_CMP_EQ, 0));
  rule(SCMP_ACT_ALLOW, SCMP_SYS(ioctl), SCMP_A1(SCMP_CMP_EQ, TCGETS));
  if (policy.profile == Profile::kNative) {
    // Files only for reading (dlopen of a memfd; Landlock refuses every path on disk), and no
    // new shared writable mapping: a worker given the heap read-only can neither reopen its
    // descriptor (/proc/self/fd/N) for writing nor map it writable.
    rule(SCMP_ACT_ALLOW, SCMP_SYS(openat), SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDONLY));
    rule(SCMP_ACT_ALLOW, SCMP_SYS(mmap), SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_WRITE, 0));
    rule(SCMP_ACT_ALLOW, SCMP_SYS(mmap), SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_SHARED, 0));
  }
  if (policy.profile == Profile::kJvm) {
    for (const char* name : kJvmCalls) allow(name);
    // Threads, never processes; clone3 hides its flags from the filter, so glibc is told it is
    // missing and falls back to clone.
    rule(SCMP_ACT_ALLOW, SCMP_SYS(clone), SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    if (rc == 0) rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    rule(SCMP_ACT_ALLOW, SCMP_SYS(prctl), SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
  } else {
    rule(SCMP_ACT_ALLOW, SCMP_SYS(tkill), SCMP_A0(SCMP_CMP_EQ, self));  // one thread: tid = pid
  }
  // Every thread the process has gets the filter too (a JVM's); new ones inherit it.
  if (rc == 0) rc = ::seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
  // A binary search over the calls rather than a list, where libseccomp can (2.5 and later): the
  // filter runs on every system call, futex included.
  if (rc == 0) ::seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc != 0) return absl::InternalError(absl::StrCat("seccomp rule: ", std::strerror(-rc)));
  rc = ::seccomp_load(ctx);
  if (rc != 0) return absl::InternalError(absl::StrCat("seccomp_load: ", std::strerror(-rc)));
  return absl::OkStatus();
}

}  // namespace

std::string Policy::Encode() const {
  std::vector<std::string> keep;
  for (int fd : keep_fds) keep.push_back(absl::StrCat(fd));
  return absl::StrCat(profile == Profile::kJvm ? "jvm" : "native", ";",
                      user ? absl::StrCat(user->name, ":", user->uid, ":", user->gid) : "", ";",
                      address_space, ";", cpu_seconds, ";", absl::StrJoin(keep, ","), ";",
                      absl::StrJoin(readable, "\x1f"));
}

absl::StatusOr<Policy> Policy::Decode(std::string_view view) {
  const std::string text(view);
  std::vector<std::string> f = absl::StrSplit(text, ';');
  Policy p;
  auto bad = [&] { return absl::InvalidArgumentError(absl::StrCat("bad sandbox policy ", text)); };
  if (f.size() != 6 || (f[0] != "jvm" && f[0] != "native")) return bad();
  p.profile = f[0] == "jvm" ? Profile::kJvm : Profile::kNative;
  if (!f[1].empty()) {
    std::vector<std::string> u = absl::StrSplit(f[1], ':');
    User user;
    if (u.size() != 3 || !absl::SimpleAtoi(u[1], &user.uid) || !absl::SimpleAtoi(u[2], &user.gid))
      return bad();
    user.name = u[0];
    p.user = user;
  }
  if (!absl::SimpleAtoi(f[2], &p.address_space) || !absl::SimpleAtoi(f[3], &p.cpu_seconds))
    return bad();
  std::vector<std::string> fds = absl::StrSplit(f[4], ',', absl::SkipEmpty());
  for (const std::string& fd : fds) {
    int n;
    if (!absl::SimpleAtoi(fd, &n)) return bad();
    p.keep_fds.push_back(n);
  }
  p.readable = absl::StrSplit(f[5], '\x1f', absl::SkipEmpty());
  return p;
}

absl::StatusOr<User> LookupUser(std::string_view name) {
  std::string n(name);
  passwd entry;
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  uid_t uid;
  int rc = absl::SimpleAtoi(n, &uid)
               ? ::getpwuid_r(uid, &entry, buf.data(), buf.size(), &found)
               : ::getpwnam_r(n.c_str(), &entry, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return absl::NotFoundError(absl::StrCat("no user '", n, "' on this machine"));
  }
  if (found->pw_uid == 0) {
    return absl::InvalidArgumentError(absl::StrCat("user '", n, "' is root: not a sandbox"));
  }
  return User{found->pw_name, found->pw_uid, found->pw_gid};
}

absl::Status Restrict(const Policy& policy, std::string* notes) {
  if (absl::Status s = SetLimits(policy); !s.ok()) return s;
  CloseOthers(policy.keep_fds);
  if (policy.user) {
    // A change of user clears the parent-death signal: set it again, and end if the parent went
    // meanwhile.
    int death_signal = 0;
    ::prctl(PR_GET_PDEATHSIG, &death_signal, 0, 0, 0);
    pid_t parent = ::getppid();
    if (absl::Status s = DropUser(*policy.user); !s.ok()) return s;
    if (death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0);
      if (::getppid() != parent) ::_exit(0);
    }
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("no_new_privs");
  return Landlock(policy, notes);
}

absl::Status Filter(const Policy& policy, const Report& report) {
  if (report.prefix.size() > kMaxPrefix) return absl::InvalidArgumentError("report too long");
  std::memcpy(g_report, report.prefix.data(), report.prefix.size());
  g_prefix_len = report.prefix.size();
  g_report_fd = report.fd;
  struct sigaction on_sys {};
  on_sys.sa_sigaction = OnForbidden;
  on_sys.sa_flags = SA_SIGINFO;
  ::sigemptyset(&on_sys.sa_mask);
  if (::sigaction(SIGSYS, &on_sys, nullptr) != 0) return Errno("sigaction SIGSYS");
  sigset_t sys;
  ::sigemptyset(&sys);
  ::sigaddset(&sys, SIGSYS);
  ::sigprocmask(SIG_UNBLOCK, &sys, nullptr);
  return Seccomp(policy);
}

absl::Status Enter(const Policy& policy, const Report& report, std::string* notes) {
  Policy keeping = policy;
  if (report.fd >= 0) keeping.keep_fds.push_back(report.fd);
  if (absl::Status s = Restrict(keeping, notes); !s.ok()) return s;
  return Filter(policy, report);
}

bool HaveLandlock() { return LandlockAbi() > 0; }

std::string SyscallName(int nr) {
  char* name = ::seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  if (name == nullptr) return absl::StrCat("#", nr);
  std::string out(name);
  std::free(name);
  return out;
}

}  // namespace ardma::sandbox
