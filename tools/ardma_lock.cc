// `ardma lock NAME -- COMMAND...`: flock(1) for the FCFS lock service, on a server or a cluster.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/status_macros.h"
#include "services/lock/lock_client.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

int64_t MonotonicNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// In the forked child: becomes a process group with COMMAND in it and watches over it. It kills
// the whole group (COMMAND, whatever it started, and itself) when `ardma lock` dies (even by
// SIGKILL: PR_SET_PDEATHSIG), and when the time `ardma lock` last sent on `deadlines` (a socket;
// a CLOCK_MONOTONIC time in ns, 8 bytes a message) passes without a later one: so COMMAND is
// stopped before its lock can pass on even if `ardma lock` itself is stopped or starved. Exits
// with COMMAND's status.
[[noreturn]] void RunGuarded(const std::vector<std::string>& command, const std::string& token,
                             int deadlines) {
  ::setpgid(0, 0);
  pid_t parent = ::getppid();
  struct sigaction on_orphan {};
  on_orphan.sa_handler = [](int) {
    ::kill(0, SIGKILL);  // the group: COMMAND and whatever it started, and this process
  };
  ::sigaction(SIGUSR1, &on_orphan, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR1);
  if (::getppid() != parent) ::kill(0, SIGKILL);  // the parent died before the line above
  struct sigaction on_child {};
  on_child.sa_handler = [](int) {};  // interrupts poll(2) when COMMAND ends
  ::sigaction(SIGCHLD, &on_child, nullptr);
  pid_t cmd = ::fork();
  if (cmd == 0) {
    ::signal(SIGUSR1, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::setenv("ARDMA_LOCK_TOKEN", token.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "ardma lock: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  if (cmd < 0) ::_exit(126);
  // SIGTERM from `ardma lock` (cannot renew) goes to the whole group, COMMAND included.
  ::signal(SIGTERM, SIG_IGN);
  int64_t kill_at = INT64_MAX;
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(cmd, &status, WNOHANG);
    if (done == cmd) break;
    int64_t now = MonotonicNs();
    if (now >= kill_at) ::kill(0, SIGKILL);
    int64_t wait_ms = std::min<int64_t>((kill_at - now) / 1000000 + 1, 1000);
    pollfd p{deadlines, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait_ms)) > 0) {
      int64_t next;
      ssize_t n = ::read(deadlines, &next, sizeof(next));
      if (n == sizeof(next)) {
        kill_at = next;
      } else if (n == 0) {
        ::kill(0, SIGKILL);  // `ardma lock` is gone
      }
    }
  }
  if (WIFSIGNALED(status)) {  // pass the signal on as the exit status would show it
    ::signal(WTERMSIG(status), SIG_DFL);
    ::kill(::getpid(), WTERMSIG(status));
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

}  // namespace

// What the renewing thread last learned, for the thread that watches COMMAND.
struct Tenure {
  absl::Mutex mu;
  // COMMAND must be stopped by then: the lease runs out (counted from when the last successful
  // renewal was sent), or, with --idle-timeout, the server may close the connection as idle
  // (counted from the same send) and pass its locks on.
  absl::Time held_until ABSL_GUARDED_BY(mu);
  bool lost ABSL_GUARDED_BY(mu) = false;  // a renewal was refused: someone else may hold it now
  bool stop ABSL_GUARDED_BY(mu) = false;
};

// `ardma lock`: runs the command under the lock, renewing the lease until it exits. Returns the
// exit code for main.
//
// The fencing rule: COMMAND never runs while another may hold the lock. The lock can pass on once
// its lease runs out or once the server closes the connection as idle; both are counted, on this
// side's clock, from the moment the last successful renewal was *sent* (the server started its
// count later). Renewals go every third of the shorter of the two, on a thread of their own (a
// renewal stuck on an unreachable server must not keep COMMAND from being stopped); if none has
// succeeded, COMMAND gets SIGTERM two thirds of the way in and its process group SIGKILL a tenth
// before the end. A refused renewal (the lock is gone) kills the group at once.
absl::StatusOr<int> RunLocked(const Options& opt, const std::string& name,
                              const std::vector<std::string>& command) {
  ClientOptions client_options;
  client_options.connect_attempts = 2;
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Servers> servers,
                         cluster::ConnectServers(opt.server, client_options));
  ARDMA_ASSIGN_OR_RETURN(Client * client, servers->For(lock::kLockSpace, name));  // its server
  lock::LockClient locks(servers.get(), Mode::kActive);
  absl::Duration wait = opt.timeout > absl::ZeroDuration() ? opt.timeout : absl::InfiniteDuration();
  auto mode = opt.shared ? lock::LockMode::kShared : lock::LockMode::kExclusive;
  ARDMA_ASSIGN_OR_RETURN(lock::Grant grant, locks.Acquire(name, mode, wait, opt.lease));
  // The wait may have been long: renew at once, so both clocks start from a known send.
  const absl::Time first_sent = absl::Now();
  if (absl::Status s = locks.Renew(grant, opt.lease); !s.ok()) {
    locks.Release(grant).IgnoreError();
    return s;
  }
  const absl::Duration idle = client->idle_timeout();
  const absl::Duration span = idle > absl::ZeroDuration() ? std::min(opt.lease, idle) : opt.lease;
  auto held_until = [&](const lock::Grant& g, absl::Time sent) {
    return idle > absl::ZeroDuration() ? std::min(g.lease_deadline, sent + idle) : g.lease_deadline;
  };
  Tenure tenure;
  {
    absl::MutexLock lock(&tenure.mu);
    tenure.held_until = held_until(grant, first_sent);
  }
  // COMMAND is killed a tenth of the span before the lock can pass on; the guard is told when.
  auto kill_at = [&](absl::Time until) {
    return MonotonicNs() + absl::ToInt64Nanoseconds(until - span / 10 - absl::Now());
  };
  int deadlines[2];  // a socket pair: a guard that has ended must not SIGPIPE us
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, deadlines) != 0) {
    locks.Release(grant).IgnoreError();
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  auto tell_guard = [&](absl::Time until) {
    int64_t at = kill_at(until);
    (void)!::send(deadlines[1], &at, sizeof(at), MSG_NOSIGNAL);
  };
  {
    absl::MutexLock lock(&tenure.mu);
    tell_guard(tenure.held_until);
  }
  std::string token = absl::StrCat(grant.token);
  pid_t child = ::fork();
  if (child < 0) {
    locks.Release(grant).IgnoreError();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (child == 0) {
    ::close(deadlines[1]);
    RunGuarded(command, token, deadlines[0]);  // never returns
  }
  ::close(deadlines[0]);

  std::thread renewer([&] {
    for (;;) {
      {
        absl::MutexLock lock(&tenure.mu);
        auto stopped = [&tenure]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tenure.mu) { return tenure.stop; };
        if (tenure.mu.AwaitWithTimeout(absl::Condition(&stopped), span / 3) || tenure.lost) return;
      }
      absl::Time sent = absl::Now();
      absl::Status renewed = locks.Renew(grant, opt.lease);
      absl::MutexLock lock(&tenure.mu);
      if (renewed.ok()) {
        tenure.held_until = held_until(grant, sent);
        tell_guard(tenure.held_until);
      } else if (renewed.code() == absl::StatusCode::kFailedPrecondition) {
        tenure.lost = true;
        return;
      }
    }
  });

  int status = 0;
  bool terminated = false, killed = false;
  absl::Status failure;
  for (;;) {
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      failure = absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
      ::kill(-child, SIGKILL);
      break;
    }
    absl::Time until;
    bool lost;
    {
      absl::MutexLock lock(&tenure.mu);
      until = tenure.held_until;
      lost = tenure.lost;
    }
    absl::Time now = absl::Now();
    if (!killed && (lost || now >= until - span / 10)) {
      std::fprintf(stderr, "ardma lock: %s the lock '%s'; killing COMMAND\n",
                   lost ? "lost" : "could not renew", name.c_str());
      ::kill(-child, SIGKILL);
      killed = true;
    } else if (!terminated && !killed && now >= until - span / 3) {
      std::fprintf(stderr, "ardma lock: cannot renew the lock '%s'; stopping COMMAND\n",
                   name.c_str());
      ::kill(-child, SIGTERM);
      terminated = true;
    }
    absl::SleepFor(std::min(absl::Milliseconds(10), span / 50));
  }
  bool lost;
  absl::Time until;
  {
    absl::MutexLock lock(&tenure.mu);
    tenure.stop = true;
    lost = tenure.lost;
    until = tenure.held_until;
  }
  renewer.join();
  if (!lost && !killed && absl::Now() >= until - span / 10) {
    // The guard stopped COMMAND on its own clock: no renewal came in time.
    std::fprintf(stderr, "ardma lock: could not renew the lock '%s' in time; COMMAND was killed\n",
                 name.c_str());
    killed = true;
  }
  ::close(deadlines[1]);
  if (!lost && !killed && !terminated) {
    if (absl::Status s = locks.Release(grant); !s.ok()) {
      std::fprintf(stderr, "ardma lock: releasing '%s': %s\n", name.c_str(),
                   std::string(s.message()).c_str());
    }
  } else {
    locks.Release(grant).IgnoreError();  // if it is still ours, free it at once
  }
  if (!failure.ok()) return failure;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace ardma::cli
