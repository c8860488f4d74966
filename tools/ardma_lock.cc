// `ardma lock NAME -- COMMAND...`: flock(1) for the FCFS lock service.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/client/client.h"
#include "core/status_macros.h"
#include "services/lock/lock_client.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

// In the forked child: becomes a process group with COMMAND in it and watches over it. If
// `ardma lock` dies (even by SIGKILL) the kernel tells this process (PR_SET_PDEATHSIG), which
// kills the whole group: COMMAND never runs on without the lock. Exits with COMMAND's status.
[[noreturn]] void RunGuarded(const std::vector<std::string>& command, const std::string& token) {
  ::setpgid(0, 0);
  pid_t parent = ::getppid();
  struct sigaction on_orphan {};
  on_orphan.sa_handler = [](int) {
    ::kill(0, SIGKILL);  // the group: COMMAND and whatever it started, and this process
  };
  ::sigaction(SIGUSR1, &on_orphan, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR1);
  if (::getppid() != parent) ::kill(0, SIGKILL);  // the parent died before the line above
  pid_t cmd = ::fork();
  if (cmd == 0) {
    ::signal(SIGUSR1, SIG_DFL);
    ::setenv("ARDMA_LOCK_TOKEN", token.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "ardma lock: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  // SIGTERM from `ardma lock` (lost lock) goes to the whole group, COMMAND included.
  ::signal(SIGTERM, SIG_IGN);
  int status = 0;
  while (cmd > 0 && ::waitpid(cmd, &status, 0) < 0 && errno == EINTR) {
  }
  if (cmd < 0) ::_exit(126);
  if (WIFSIGNALED(status)) {  // pass the signal on as the exit status would show it
    ::signal(WTERMSIG(status), SIG_DFL);
    ::kill(::getpid(), WTERMSIG(status));
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

}  // namespace

// `ardma lock`: runs the command under the lock, renewing the lease until it exits. Returns the
// exit code for main.
absl::StatusOr<int> RunLocked(const Options& opt, const std::string& name,
                              const std::vector<std::string>& command) {
  ClientOptions client_options;
  client_options.connect_attempts = 2;
  ARDMA_ASSIGN_OR_RETURN(auto client, Client::Connect(opt.server, client_options));
  lock::LockClient locks(client.get(), Mode::kActive);
  absl::Duration wait = opt.timeout > absl::ZeroDuration() ? opt.timeout : absl::InfiniteDuration();
  auto mode = opt.shared ? lock::LockMode::kShared : lock::LockMode::kExclusive;
  ARDMA_ASSIGN_OR_RETURN(lock::Grant grant, locks.Acquire(name, mode, wait, opt.lease));
  std::string token = absl::StrCat(grant.token);
  pid_t child = ::fork();
  if (child < 0) {
    locks.Release(grant).IgnoreError();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (child == 0) RunGuarded(command, token);  // never returns
  // Renew at a third of the lease while the command runs.
  int status = 0;
  bool lost = false;
  absl::Time stop_deadline = absl::InfiniteFuture();
  absl::Time next_renewal = absl::Now() + opt.lease / 3;
  for (;;) {
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      locks.Release(grant).IgnoreError();
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    absl::SleepFor(std::min(absl::Milliseconds(20), opt.lease / 10));
    if (absl::Now() < next_renewal) continue;
    next_renewal = absl::Now() + opt.lease / 3;
    if (!lost && !locks.Renew(grant, opt.lease).ok()) {
      // Someone else may hold it now: the command must not go on as if it still did.
      lost = true;
      std::fprintf(stderr, "ardma lock: lost the lock '%s' (lease ran out); stopping COMMAND\n",
                   name.c_str());
      ::kill(-child, SIGTERM);
      stop_deadline = absl::Now() + absl::Seconds(2);
    }
    if (lost && absl::Now() > stop_deadline) ::kill(-child, SIGKILL);
  }
  if (!lost) {
    if (absl::Status s = locks.Release(grant); !s.ok()) {
      std::fprintf(stderr, "ardma lock: releasing '%s': %s\n", name.c_str(),
                   std::string(s.message()).c_str());
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace ardma::cli
