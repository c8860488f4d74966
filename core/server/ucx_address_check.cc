// The checker's protocol, over a Unix socket pair (the checker's end is its descriptor 3):
//
//   request := length:u32 address:u8[length]
//   answer  := ok:u8 (1: an endpoint was made and closed) length:u32 message:u8[length]
//
// The checker answers requests until its end closes. It is started with kCheckVariable set to
// "WAKEUP:RMA" (the UcxContextOptions, 0 or 1 each); its standard output and error are /dev/null
// (UCX logs what it refuses).
#include "core/server/ucx_address_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/net/socket_connect.h"
#include "core/spawn_environment.h"

namespace ardma {
namespace {

constexpr char kCheckVariable[] = "ARDMA_UCX_ADDRESS_CHECK";
constexpr int kCheckFd = 3;
constexpr size_t kMaxAddress = 1 << 20;
// An address whose endpoint is not made in this time hung the checker.
constexpr absl::Duration kCheckTimeout = absl::Seconds(4);
// Starting a checker: the program, then a UCP context.
constexpr absl::Duration kStartTimeout = absl::Seconds(10);

bool SendAnswer(int fd, bool ok, std::string_view message) {
  std::string answer(1, ok ? 1 : 0);
  uint32_t length = static_cast<uint32_t>(message.size());
  answer.append(reinterpret_cast<const char*>(&length), 4).append(message);
  return SendAll(fd, answer).ok();
}

// An answer (ok, message) by `deadline`; false if none came.
bool ReadAnswer(int fd, absl::Time deadline, bool* ok, std::string* message) {
  char flag;
  uint32_t length;
  if (!RecvExactly(fd, &flag, 1, deadline).ok() ||
      !RecvExactly(fd, reinterpret_cast<char*>(&length), 4, deadline).ok() || length > 4096) {
    return false;
  }
  message->resize(length);
  *ok = flag == 1;
  return RecvExactly(fd, message->data(), length, deadline).ok();
}

// The checker: this program started again with kCheckVariable set. Runs before main and never
// returns to it.
[[gnu::constructor]] void RunUcxAddressCheckIfAsked() {
  const char* spec = std::getenv(kCheckVariable);
  if (spec == nullptr) return;
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // an address that makes UCX abort leaves no core file
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  UcxContextOptions options;
  options.wakeup = spec[0] == '1';
  options.rma = spec[0] != '\0' && spec[1] == ':' && spec[2] == '1';
  absl::StatusOr<std::unique_ptr<UcxContext>> ucx = UcxContext::Create(options);
  if (!ucx.ok()) {
    SendAnswer(kCheckFd, false, std::string(ucx.status().message()));
    ::_exit(1);
  }
  SendAnswer(kCheckFd, true, "ready");
  std::string address;
  for (;;) {
    uint32_t length;
    if (!RecvExactly(kCheckFd, reinterpret_cast<char*>(&length), 4).ok() || length > kMaxAddress) {
      break;
    }
    address.resize(length);
    if (!RecvExactly(kCheckFd, address.data(), length).ok()) break;
    absl::StatusOr<ucp_ep_h> ep = (*ucx)->Connect(address, absl::InfinitePast());
    if (ep.ok()) (*ucx)->CloseEndpoint(*ep, absl::Milliseconds(10));
    if (!SendAnswer(kCheckFd, ep.ok(), ep.ok() ? "" : std::string(ep.status().message()))) break;
  }
  ::_exit(0);
}

}  // namespace

UcxAddressCheck::~UcxAddressCheck() {
  absl::MutexLock lock(&mu_);
  StopLocked();
}

uint64_t UcxAddressCheck::restarts() const {
  absl::MutexLock lock(&mu_);
  return restarts_;
}

absl::Status UcxAddressCheck::Warm() {
  absl::MutexLock lock(&mu_);
  return pid_ > 0 ? absl::OkStatus() : StartLocked();
}

absl::Status UcxAddressCheck::StartLocked() {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, pair[1], kCheckFd);
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  SpawnEnvironment env(
      {{kCheckVariable, absl::StrCat(options_.wakeup ? 1 : 0, ":", options_.rma ? 1 : 0)}});
  char name[] = "ardma-ucx-address-check";
  char* argv[] = {name, nullptr};
  pid_t pid = -1;
  int spawned = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, env.get());
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(pair[1]);
  if (spawned != 0) {
    ::close(pair[0]);
    return absl::InternalError(
        absl::StrCat("cannot start the UCX address check: ", std::strerror(spawned)));
  }
  pid_ = pid;
  fd_ = pair[0];
  bool ok = false;
  std::string message;
  if (!ReadAnswer(fd_, absl::Now() + kStartTimeout, &ok, &message) || !ok) {
    std::string ended = StopLocked();
    return absl::InternalError(
        absl::StrCat("the UCX address check did not start (", ended, "): ", message));
  }
  return absl::OkStatus();
}

std::string UcxAddressCheck::StopLocked() {
  if (pid_ <= 0) return "not running";
  ::close(fd_);
  fd_ = -1;
  int status = 0;
  pid_t done;
  // Closing its end ends a checker that waits for a request; one that is stuck is killed.
  const absl::Time give_up = absl::Now() + absl::Milliseconds(100);
  while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Microseconds(200));
  }
  if (done == 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  if (WIFSIGNALED(status)) return absl::StrCat("killed by ", ::strsignal(WTERMSIG(status)));
  return absl::StrCat("exit status ", WIFEXITED(status) ? WEXITSTATUS(status) : status);
}

absl::Status UcxAddressCheck::Check(std::string_view address) {
  if (address.size() > kMaxAddress) {
    return absl::InvalidArgumentError("UCX_CONNECT: the worker address is too long");
  }
  absl::MutexLock lock(&mu_);
  if (pid_ > 0) {
    // A checker that ended by itself (its starting thread ended, say) is not the address's fault.
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, 0) != 0) StopLocked();
  }
  if (pid_ <= 0) {
    if (absl::Status started = StartLocked(); !started.ok()) return started;
  }
  uint32_t length = static_cast<uint32_t>(address.size());
  std::string request(reinterpret_cast<const char*>(&length), 4);
  request.append(address);
  bool ok = false;
  std::string message;
  if (!SendAll(fd_, request).ok() || !ReadAnswer(fd_, absl::Now() + kCheckTimeout, &ok, &message)) {
    std::string ended = StopLocked();
    ++restarts_;
    return absl::InvalidArgumentError(absl::StrCat(
        "UCX_CONNECT: malformed UCX worker address (unpacking it ended the address check: ", ended,
        ")"));
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("UCX_CONNECT: UCX refused the worker address: ", message));
  }
  return absl::OkStatus();
}

}  // namespace ardma
