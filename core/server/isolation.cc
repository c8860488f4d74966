#include "core/server/isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/active/active_library.h"
#include "core/active/native_loader.h"
#include "core/log.h"
#include "core/memory/region.h"
#include "core/net/socket_connect.h"
#include "core/server/isolation_channel.h"
#include "core/spawn_environment.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/wire/frame.h"

namespace ardma {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

// How long past its deadline a worker may take to answer before it is killed (it checks the
// deadline itself on memory operations, and answers DEADLINE_EXCEEDED).
constexpr absl::Duration kKillGrace = absl::Milliseconds(100);
constexpr absl::Duration kSpawnTimeout = absl::Seconds(10);
constexpr int kMaxDepth = 32;

// How a reaped worker ended, for people.
std::string Ending(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

// The status of a call whose worker died while running it (`status` from waitpid).
absl::Status Died(std::string_view function, int status, const std::string& how) {
  std::string fn(function);
  if ((WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) ||
      (WIFEXITED(status) && WEXITSTATUS(status) == sandbox::kForbiddenExit)) {
    return absl::PermissionDeniedError(absl::StrCat(
        fn, " made a forbidden system call; its isolated worker was ended (", how, ")"));
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU) {
    return absl::ResourceExhaustedError(
        absl::StrCat(fn, " used up its isolated worker's CPU time limit (", how, ")"));
  }
  return absl::InternalError(absl::StrCat(fn, " crashed its isolated worker: ", how));
}

}  // namespace

// ---- The server's side ----

absl::StatusOr<std::unique_ptr<IsolatedPool>> IsolatedPool::Start(const IsolationOptions& options,
                                                                  const CodeRegistry* registry,
                                                                  OwnerTable* owners) {
  if (!CanBeWorker()) {
    return absl::FailedPreconditionError(
        "--isolate needs the ardmad program (its workers are ardmad started again)");
  }
  if (options.heap_fd < 0 || options.workers < 1) {
    return absl::InvalidArgumentError("isolation needs the heap's file and at least one worker");
  }
  IsolationOptions own = options;
  own.heap_fd = ::fcntl(options.heap_fd, F_DUPFD_CLOEXEC, 0);  // the caller may close its own
  if (own.heap_fd < 0) {
    return absl::InternalError(absl::StrCat("dup of the heap's file: ", std::strerror(errno)));
  }
  std::unique_ptr<IsolatedPool> pool(new IsolatedPool(own, registry, owners));
  // A descriptor that cannot write: a worker given it can map the heap only read-only.
  pool->read_only_heap_fd_ =
      ::open(absl::StrCat("/proc/self/fd/", own.heap_fd).c_str(), O_RDONLY | O_CLOEXEC);
  if (pool->read_only_heap_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("opening the heap's file for reading: ", std::strerror(errno)));
  }
  if (own.confine) {
    ARDMA_LOG(kInfo, "isolated workers run in a sandbox as %s%s",
              own.user ? own.user->name : std::string("ardmad's own user"),
              sandbox::HaveLandlock() ? "" : "; this kernel has no Landlock, so files that user "
                                             "may open stay open to shipped code");
  }
  // One worker now, so a program that cannot start them fails at start, not at the first call.
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Worker> first, pool->Spawn(Kind::kNative, true));
  pool->Give(std::move(first));
  return pool;
}

IsolatedPool::~IsolatedPool() {
  std::vector<std::unique_ptr<Worker>> idle;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    idle.swap(idle_);
    auto no_one_busy = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return busy_ == 0; };
    mu_.Await(absl::Condition(&no_one_busy));
  }
  for (auto& w : idle) End(std::move(w), /*kill=*/true);
  ::close(options_.heap_fd);
  if (read_only_heap_fd_ >= 0) ::close(read_only_heap_fd_);
}

sandbox::Policy IsolatedPool::PolicyFor(Kind kind) const {
  sandbox::Policy p;
  p.profile = kind;
  p.user = options_.user;
  p.cpu_seconds = options_.cpu_seconds;
  p.keep_fds = {kChannelFd, kHeapFd};
  if (kind == Kind::kNative) {
    p.address_space = options_.heap_size + options_.address_space_slack;
  } else {
    // A JVM reserves far more address space than it uses; its heap is capped by -Xmx instead.
    // It reads (and maps) its own files after it starts: the JDK and the system's libraries.
    std::string libjvm = options_.jvm.libjvm.empty() ? JvmDefaultLibrary() : options_.jvm.libjvm;
    std::string home = libjvm;
    for (int up = 0; up < 3 && home.rfind('/') != std::string::npos; ++up) {
      home.resize(home.rfind('/'));  // .../lib/server/libjvm.so -> the JDK's home
    }
    p.readable = {home, "/usr/lib", "/usr/share", "/lib", "/proc", "/sys"};
    // Its configuration may live elsewhere (Debian: conf/security/java.security ->
    // /etc/java-17-openjdk/security/java.security): the directories its links point into.
    namespace fs = std::filesystem;
    std::error_code error;
    for (fs::recursive_directory_iterator it(home + "/conf", error), end; !error && it != end;
         it.increment(error)) {
      if (!it->is_symlink(error)) continue;
      fs::path target = fs::canonical(it->path(), error);
      std::string dir = target.parent_path().string();
      if (!error && std::find(p.readable.begin(), p.readable.end(), dir) == p.readable.end()) {
        p.readable.push_back(dir);
      }
    }
  }
  return p;
}

absl::StatusOr<std::unique_ptr<IsolatedPool::Worker>> IsolatedPool::Spawn(Kind kind,
                                                                          bool writable) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  // Above the targets, so the dup2s cannot clobber each other.
  int chan = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 16),
      heap = ::fcntl(writable ? options_.heap_fd : read_only_heap_fd_, F_DUPFD_CLOEXEC, 16);
  ::close(pair[1]);
  auto w = std::make_unique<Worker>();
  w->kind = kind;
  w->writable = writable;
  w->fd = pair[0];
  w->owner = owners_ != nullptr ? owners_->Join() : LockOwner{};
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, chan, kChannelFd);
  ::posix_spawn_file_actions_adddup2(&actions, heap, kHeapFd);
  std::string jvm =
      absl::StrCat(options_.jvm.libjvm, std::string(1, kJvmSeparator), options_.jvm.classpath);
  for (const std::string& o : options_.jvm.options)
    absl::StrAppend(&jvm, std::string(1, kJvmSeparator), o);
  SpawnEnvironment env({
      // A crash is the server's to report, without UCX's backtrace on the server's stderr.
      {"UCX_HANDLE_ERRORS", "none"},
      {kJvmVariable, std::move(jvm)},
      {kWorkerVariable,
       absl::StrCat(options_.heap_size, ":", w->owner.token, ":", w->owner.table, ":", ::getpid(),
                    writable ? ":rw" : ":ro")},
      {kSandboxVariable, options_.confine ? PolicyFor(kind).Encode() : std::string()},
  });
  char name[] = "ardmad-isolated";
  char* argv[] = {name, nullptr};
  int spawned = ::posix_spawn(&w->pid, "/proc/self/exe", &actions, nullptr, argv, env.get());
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(chan);
  ::close(heap);
  if (spawned != 0) {
    w->pid = -1;
    std::string why = std::strerror(spawned);
    End(std::move(w), false);
    return absl::ResourceExhaustedError(absl::StrCat("cannot start an isolated worker: ", why));
  }
  pollfd p{w->fd, POLLIN, 0};
  Type type;
  std::string msg;
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kSpawnTimeout))) != 1 ||
      !ReceiveMessage(w->fd, &type, &msg) || type != kReady) {
    std::string how = End(std::move(w), true);
    return absl::InternalError(absl::StrCat("an isolated worker did not start (", how, ")"));
  }
  return w;
}

std::string IsolatedPool::End(std::unique_ptr<Worker> w, bool kill, int* status_out) {
  std::string how = "not started";
  if (w->pid > 0) {
    if (kill) ::kill(w->pid, SIGKILL);
    ::close(w->fd);
    w->fd = -1;
    int status = 0;
    while (::waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
    }
    how = Ending(status);
    if (status_out != nullptr) *status_out = status;
  }
  if (w->fd >= 0) ::close(w->fd);
  if (owners_ != nullptr) owners_->Leave(w->owner.token);  // its lock words may be taken over now
  return how;
}

absl::StatusOr<std::unique_ptr<IsolatedPool::Worker>> IsolatedPool::Take(Kind kind, bool writable,
                                                                         absl::Time deadline) {
  std::unique_ptr<Worker> other;  // an idle worker of another sort, ended to make room
  {
    absl::MutexLock lock(&mu_);
    auto available = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stopping_ || !idle_.empty() ||
             busy_ + static_cast<int>(idle_.size()) < options_.workers;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&available), deadline)) {
      return absl::DeadlineExceededError("every isolated worker stayed busy until the deadline");
    }
    if (stopping_) return absl::CancelledError("server is shutting down");
    ++busy_;
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      if ((*it)->kind != kind || (*it)->writable != writable) continue;
      std::unique_ptr<Worker> w = std::move(*it);
      idle_.erase(std::next(it).base());
      return w;
    }
    if (busy_ - 1 + static_cast<int>(idle_.size()) >= options_.workers) {
      other = std::move(idle_.front());
      idle_.erase(idle_.begin());
    }
  }
  if (other != nullptr) End(std::move(other), /*kill=*/true);
  absl::StatusOr<std::unique_ptr<Worker>> w = Spawn(kind, writable);
  if (!w.ok()) {
    absl::MutexLock lock(&mu_);
    --busy_;
  }
  return w;
}

void IsolatedPool::Give(std::unique_ptr<Worker> worker) {
  absl::MutexLock lock(&mu_);
  if (worker != nullptr) idle_.push_back(std::move(worker));
}

bool IsolatedPool::Isolates(const BoundFunction& fn) const {
  return fn.scope() != nullptr && !fn.scope()->empty() &&
         registry_->SourceOf(fn.scope()->front()).ok();
}

absl::Status IsolatedPool::EnsureLoaded(Worker& w, const CodeHash& hash, int depth) {
  if (w.loaded.contains(hash)) return absl::OkStatus();
  if (depth > kMaxDepth) return absl::InternalError("library dependencies nest too deep");
  absl::StatusOr<CodeRegistry::Source> source = registry_->SourceOf(hash);
  if (!source.ok()) return absl::OkStatus();  // linked or Java: the worker calls the server for it
  for (const CodeHash& dep : source->deps) ARDMA_RETURN_IF_ERROR(EnsureLoaded(w, dep, depth + 1));
  std::string msg;
  ByteWriter out(&msg);
  out.Bytes(std::string_view(reinterpret_cast<const char*>(hash.data()), 32));
  out.U8(static_cast<uint8_t>(source->kind));
  out.Str16(source->name);
  out.U16(static_cast<uint16_t>(source->deps.size()));
  for (const CodeHash& dep : source->deps) {
    out.Bytes(std::string_view(reinterpret_cast<const char*>(dep.data()), 32));
  }
  out.Bytes(*source->code);
  if (!SendMessage(w.fd, kLoad, msg)) return absl::InternalError("the isolated worker went away");
  w.loaded.insert(hash);
  return absl::OkStatus();
}

namespace {

// A worker's kDone: the function's result (or error) in *result and its memory-access counts
// added to *counts. False if the message is malformed.
bool ReadDone(std::string_view msg, ActiveOpCounts* counts, absl::StatusOr<std::string>* result,
              bool* retire) {
  ByteReader r(msg);
  uint16_t code = 0;
  uint64_t c[7];
  uint8_t flags = 0;
  bool ok = r.U16(&code);
  for (uint64_t& v : c) ok = ok && r.U64(&v);
  if (!ok || !r.U8(&flags)) return false;
  *retire = (flags & kRetireFlag) != 0;
  counts->reads += c[0];
  counts->writes += c[1];
  counts->cas += c[2];
  counts->fetch_adds += c[3];
  counts->bytes_read += c[4];
  counts->bytes_written += c[5];
  counts->calls += c[6];
  std::string rest(r.Rest());
  *result = code != 0 ? absl::StatusOr<std::string>(wire::StatusFromWire(code, rest)) : rest;
  return true;
}

// What a running worker asks of the server (park, resume, wake, a close hook, a call), done
// through `server`; the answer to send back in *answer (an error for a malformed request). False
// for a message that is not such a request.
bool AnswerWorker(Type type, std::string_view msg, LocalContext& server,
                  absl::StatusOr<std::string>* answer) {
  ByteReader r(msg);
  *answer = absl::InternalError("malformed request from an isolated worker");
  auto yes_no = [](const absl::StatusOr<bool>& b) {
    return b.ok() ? absl::StatusOr<std::string>(std::string(*b ? "\1" : "\0", 1))
                  : absl::StatusOr<std::string>(b.status());
  };
  auto empty_or = [](const absl::Status& s) {
    return s.ok() ? absl::StatusOr<std::string>(std::string()) : absl::StatusOr<std::string>(s);
  };
  switch (type) {
    case kPark: {
      uint8_t resumable;
      uint64_t at;
      std::string_view key;
      if (!r.U8(&resumable) || !r.U64(&at) || !r.Str16(&key)) return true;
      *answer = empty_or(server.Park(key, {.resumable = resumable != 0,
                                           .resume_at = FromUnixNanos(static_cast<int64_t>(at)),
                                           .resume_args = r.Rest()}));
      return true;
    }
    case kResume:
      *answer = yes_no(server.Resume(msg));
      return true;
    case kWake: {
      std::string_view key;
      if (r.Str16(&key)) *answer = yes_no(server.Wake(key, r.Rest()));
      return true;
    }
    case kOnClose: {
      std::string_view key, function;
      if (r.Str16(&key) && r.Str16(&function)) {
        *answer = empty_or(server.OnClose(key, function, r.Rest()));
      }
      return true;
    }
    case kCall: {
      std::string_view function;
      if (r.Str16(&function)) *answer = server.Call(function, r.Rest());
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

void IsolatedPool::Release(std::unique_ptr<Worker> worker, Outcome outcome, int* status) {
  switch (outcome) {
    case Outcome::kHealthy:
      break;
    case Outcome::kBroken:
      restarts_.fetch_add(1, std::memory_order_relaxed);
      End(std::move(worker), /*kill=*/true, status);
      break;
    case Outcome::kDied:  // its channel closed: it ended, or closed it and runs on (killed
      // then; killing a dead one changes nothing, its own ending is what waitpid reports)
      restarts_.fetch_add(1, std::memory_order_relaxed);
      End(std::move(worker), /*kill=*/true, status);
      break;
    case Outcome::kRetired:  // not a restart: it served its time
      retired_.fetch_add(1, std::memory_order_relaxed);
      End(std::move(worker), /*kill=*/true, status);
      break;
  }
  absl::MutexLock lock(&mu_);
  --busy_;
  if (worker != nullptr) idle_.push_back(std::move(worker));
}

absl::StatusOr<std::string> IsolatedPool::Run(const BoundFunction& fn, std::string_view args,
                                              Execution& ex, bool writable) {
  runs_.fetch_add(1, std::memory_order_relaxed);
  const CodeHash& hash = fn.scope()->front();
  absl::StatusOr<CodeRegistry::Source> source = registry_->SourceOf(hash);
  const Kind kind =
      source.ok() && source->kind == wire::CodeKind::kJvm ? Kind::kJvm : Kind::kNative;
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Worker> w, Take(kind, writable, ex.deadline));
  // Every way out releases the worker: given back, or ended and its place freed.
  if (absl::Status loaded = EnsureLoaded(*w, hash); !loaded.ok()) {
    Release(std::move(w), Outcome::kBroken);
    return loaded;
  }
  std::string exec;
  ByteWriter out(&exec);
  out.Bytes(std::string_view(reinterpret_cast<const char*>(hash.data()), 32));
  out.U64(static_cast<uint64_t>(UnixNanos(ex.deadline)));
  out.Str16(fn.name());
  out.Bytes(args);
  if (!SendMessage(w->fd, kExec, exec)) {
    Release(std::move(w), Outcome::kBroken);
    return absl::InternalError("the isolated worker went away before the call");
  }
  return Await(fn, std::move(w), ex);
}

absl::StatusOr<std::string> IsolatedPool::Await(const BoundFunction& fn,
                                                std::unique_ptr<Worker> w, Execution& ex) {
  LocalContext server(&ex);  // runs what the worker asks of the server
  absl::Time kill_at =
      ex.deadline == absl::InfiniteFuture() ? ex.deadline : ex.deadline + kKillGrace;
  for (;;) {
    absl::Time now = absl::Now();
    if (now >= kill_at) {
      Release(std::move(w), Outcome::kBroken);
      return absl::DeadlineExceededError(absl::StrCat(
          ToAbsl(fn.name()), " ran past its deadline: its isolated worker was killed"));
    }
    if (ex.cancelled != nullptr && ex.cancelled->load(std::memory_order_relaxed)) {
      Release(std::move(w), Outcome::kBroken);
      return absl::CancelledError("server is shutting down");
    }
    int wait_ms =
        static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(kill_at - now) + 1, 100));
    pollfd p{w->fd, POLLIN, 0};
    int ready = ::poll(&p, 1, wait_ms);
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    Type type;
    std::string msg;
    if (ready < 0 || !ReceiveMessage(w->fd, &type, &msg)) {
      int status = 0;
      Release(std::move(w), Outcome::kDied, &status);
      absl::Status died = Died(fn.name(), status, Ending(status));
      if (absl::IsPermissionDenied(died)) forbidden_.fetch_add(1, std::memory_order_relaxed);
      return died;
    }
    if (type == kForbidden) {
      uint32_t nr = 0;
      if (msg.size() == 4) std::memcpy(&nr, msg.data(), 4);
      forbidden_.fetch_add(1, std::memory_order_relaxed);
      Release(std::move(w), Outcome::kBroken);
      return absl::PermissionDeniedError(absl::StrCat(
          ToAbsl(fn.name()), " made a forbidden system call: ",
          sandbox::SyscallName(static_cast<int>(nr)), "; its isolated worker was ended"));
    }
    if (type == kDone) {
      absl::StatusOr<std::string> result;
      bool retire = false;
      bool well_formed = ReadDone(msg, &ex.counts, &result, &retire);
      Release(std::move(w), !well_formed ? Outcome::kBroken
                            : retire     ? Outcome::kRetired
                                         : Outcome::kHealthy);
      if (!well_formed) return absl::InternalError("malformed answer from an isolated worker");
      return result;
    }
    absl::StatusOr<std::string> answer;
    if (!AnswerWorker(type, msg, server, &answer)) {
      Release(std::move(w), Outcome::kBroken);
      return absl::InternalError("unexpected message from an isolated worker");
    }
    std::string reply = ReplyPayload(answer.status(), answer.ok() ? *answer : "");
    if (!SendMessage(w->fd, kReply, reply)) continue;  // it died: the next poll sees it
  }
}

}  // namespace ardma
