// The sandbox of processes that run shipped code outside the server: isolated workers (ardmad
// --isolate) and trial loads of new native libraries.
//
// Enter confines the calling process for good, in this order:
//   1. rlimits: no core files, the address space and CPU time bounded (Policy);
//   2. every descriptor closed but stdin/stdout/stderr and the ones the policy keeps;
//   3. the user dropped (setgroups, setresgid, setresuid) when the policy names one (needs root);
//   4. no_new_privs, so nothing it executes can gain privileges;
//   5. Landlock (when the kernel has it): no access to any file or directory of any mounted file
//      system, read or write; descriptors it already holds and anonymous files (the memfds code is
//      loaded from, /proc/self/fd/N) stay usable;
//   6. a seccomp-bpf allow-list (libseccomp): memory management (but no new shared writable
//      mapping), futex, clocks, sleeping, reading and writing descriptors it holds, signals to
//      itself, memfd_create and openat for reading only (for loading code; Landlock refuses every
//      path on disk), exit. Not: socket, connect, bind, execve, fork,
//      clone of processes, ptrace, kill or tgkill of another process, mount, setuid and friends,
//      bpf, io_uring, keyctl, and everything else not listed. The kJvm profile adds what a JVM's
//      own threads need (threads, not processes; scheduling queries; reading its files).
// A forbidden system call raises SIGSYS; the handler Enter installs writes `report` (the frame
// ForbiddenReport builds, with the call's number) to `report_fd` and ends the process with
// kForbiddenExit. Shipped code cannot replace that handler (rt_sigaction of SIGSYS is itself
// forbidden); if it blocks SIGSYS, the kernel ends the process with SIGSYS instead, as it does at
// once for a call in another architecture's numbering (int 0x80 on x86-64).
#ifndef ARDMA_CORE_ACTIVE_SANDBOX_H_
#define ARDMA_CORE_ACTIVE_SANDBOX_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ardma::sandbox {

enum class Profile { kNative, kJvm };

struct User {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct Policy {
  Profile profile = Profile::kNative;
  std::optional<User> user;    // drop to this user (the process must be root); none: stay
  uint64_t address_space = 0;  // RLIMIT_AS in bytes; 0: unlimited
  uint64_t cpu_seconds = 0;    // RLIMIT_CPU; 0: unlimited
  std::vector<int> keep_fds;   // besides 0, 1 and 2
  // Landlock rules of the kJvm profile: directories whose files it may read (and execute).
  std::vector<std::string> readable;

  // As an environment variable's value, for a process started as this program again.
  std::string Encode() const;
  static absl::StatusOr<Policy> Decode(std::string_view text);
};

// The exit status of a process that made a forbidden system call (after reporting it).
constexpr int kForbiddenExit = 77;

// The user --isolate-user names (a name or a numeric uid).
absl::StatusOr<User> LookupUser(std::string_view name);

// What Enter installs as its SIGSYS report: `prefix` (at most 64 bytes) followed by the forbidden
// call's number as 4 little-endian bytes. Kept by Enter; written with one write(2).
struct Report {
  int fd = -1;
  std::string prefix;
};

// Confines this process (see the top of this file). Fails, leaving the process to exit, when a
// step that was asked for cannot be done; *notes gets what this kernel lacks (no Landlock).
// Enter = Restrict (steps 1-5) then Filter (step 6), with report.fd kept open; a process that must
// start something between them (a JVM: it reads its files and starts threads, which inherit
// Landlock) calls the two itself. Filter applies to every thread of the process.
absl::Status Enter(const Policy& policy, const Report& report, std::string* notes);
absl::Status Restrict(const Policy& policy, std::string* notes);
absl::Status Filter(const Policy& policy, const Report& report);

// Whether this kernel can enforce Landlock rules.
bool HaveLandlock();

// The name of system call `nr` on this machine ("socket"), or "#nr" if unknown.
std::string SyscallName(int nr);

}  // namespace ardma::sandbox

#endif  // ARDMA_CORE_ACTIVE_SANDBOX_H_
