#include "core/server/isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
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

// A library hash as the channel carries it.
std::string_view HashBytes(const CodeHash& hash) {
  return std::string_view(reinterpret_cast<const char*>(hash.data()), hash.size());
}

// How long past its deadline a worker may take to answer before it is killed (it checks the
// deadline itself on memory operations, and answers DEADLINE_EXCEEDED).
constexpr absl::Duration kKillGrace = absl::Milliseconds(100);
constexpr absl::Duration kSpawnTimeout = absl::Seconds(10);
// How long a caller on its worker's CPU yields to it before it sleeps.
constexpr absl::Duration kYield = absl::Microseconds(50);
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
  ARDMA_ASSIGN_OR_RETURN(pool->watch_, DeathWatch::Start());
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
  absl::StatusOr<int> mailbox_fd = Mailbox::CreateFile();
  if (!mailbox_fd.ok()) {
    ::close(pair[0]);
    ::close(pair[1]);
    return mailbox_fd.status();
  }
  // Above the targets, so the dup2s cannot clobber each other.
  int chan = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 16),
      heap = ::fcntl(writable ? options_.heap_fd : read_only_heap_fd_, F_DUPFD_CLOEXEC, 16),
      box = ::fcntl(*mailbox_fd, F_DUPFD_CLOEXEC, 16);
  ::close(pair[1]);
  ::close(*mailbox_fd);
  auto w = std::make_unique<Worker>();
  w->kind = kind;
  w->writable = writable;
  w->fd = pair[0];
  w->owner = owners_ != nullptr ? owners_->Join() : LockOwner{};
  absl::StatusOr<std::unique_ptr<Mailbox>> mailbox = Mailbox::Map(box, Mailbox::kServer);
  if (!mailbox.ok()) {
    ::close(chan);
    ::close(heap);
    ::close(box);
    End(std::move(w), false);
    return mailbox.status();
  }
  w->mailbox = *std::move(mailbox);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, chan, kChannelFd);
  ::posix_spawn_file_actions_adddup2(&actions, heap, kHeapFd);
  ::posix_spawn_file_actions_adddup2(&actions, box, kMailboxFd);
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
                    writable ? ":rw:" : ":ro:", absl::ToInt64Nanoseconds(options_.spin))},
      {kSandboxVariable, options_.confine ? PolicyFor(kind).Encode() : std::string()},
  });
  char name[] = "ardmad-isolated";
  char* argv[] = {name, nullptr};
  int spawned = ::posix_spawn(&w->pid, "/proc/self/exe", &actions, nullptr, argv, env.get());
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(chan);
  ::close(heap);
  ::close(box);
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
  absl::StatusOr<uint64_t> watch = watch_->Watch(w->pid, w->fd, w->mailbox.get());
  if (!watch.ok()) {
    End(std::move(w), true);
    return watch.status();
  }
  w->watch = *watch;
  return w;
}

std::string IsolatedPool::End(std::unique_ptr<Worker> w, bool kill, int* status_out) {
  std::string how = "not started";
  if (w->watch != 0) watch_->Forget(w->watch);  // before the mailbox goes
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

std::unique_ptr<IsolatedPool::Worker> IsolatedPool::TryTake(bool writable, const CodeHash& hash) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return nullptr;
  for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
    if ((*it)->writable != writable || !(*it)->loaded.contains(hash)) continue;
    std::unique_ptr<Worker> w = std::move(*it);
    idle_.erase(std::next(it).base());
    ++busy_;
    return w;
  }
  return nullptr;
}

bool IsolatedPool::Isolates(const BoundFunction& fn) const {
  return fn.scope() != nullptr && !fn.scope()->empty() &&
         registry_->SourceOf(fn.scope()->front()).ok();
}

IsolatedPool::InFlight::~InFlight() {
  if (worker != nullptr) pool->Release(std::move(worker), Outcome::kBroken);
}

IsolatedPool::Kind IsolatedPool::KindOf(const CodeHash& hash) const {
  absl::StatusOr<CodeRegistry::Source> source = registry_->SourceOf(hash);
  return source.ok() && source->kind == wire::CodeKind::kJvm ? Kind::kJvm : Kind::kNative;
}

absl::Status IsolatedPool::EnsureLoaded(InFlight& call, const CodeHash& hash,
                                        absl::Time deadline) {
  absl::Status loaded = SendCode(call, hash, deadline, 0);
  if (!loaded.ok() && call.worker != nullptr) Release(std::move(call.worker), Outcome::kHealthy);
  return loaded;
}

absl::Status IsolatedPool::SendCode(InFlight& call, const CodeHash& hash, absl::Time deadline,
                                    int depth) {
  if (call.worker->loaded.contains(hash)) return absl::OkStatus();
  auto fail = [&](absl::Status s) {
    Release(std::move(call.worker), Outcome::kBroken);
    return s;
  };
  if (depth > kMaxDepth) return fail(absl::InternalError("library dependencies nest too deep"));
  absl::StatusOr<CodeRegistry::Source> source = registry_->SourceOf(hash);
  if (!source.ok()) return absl::OkStatus();  // linked or Java: the worker calls the server for it
  for (const CodeHash& dep : source->deps) {
    ARDMA_RETURN_IF_ERROR(SendCode(call, dep, deadline, depth + 1));
  }
  std::string msg;
  ByteWriter out(&msg);
  out.Bytes(HashBytes(hash));
  out.U8(static_cast<uint8_t>(source->kind));
  out.Str16(source->name);
  out.U16(static_cast<uint16_t>(source->deps.size()));
  for (const CodeHash& dep : source->deps) {
    out.Bytes(HashBytes(dep));
  }
  out.Bytes(*source->code);
  if (!call.worker->mailbox->Send(kLoad, msg, call.worker->fd)) {
    return fail(absl::InternalError("the isolated worker went away"));
  }
  // The worker answers with how loading went.
  Type type;
  std::string reply;
  absl::Status ended;
  absl::Time kill_at =
      deadline == absl::InfiniteFuture() ? deadline : deadline + kKillGrace;
  if (Listen(call, kill_at, absl::InfiniteFuture(), nullptr, &type, &reply, &ended) !=
      Heard::kMessage) {
    return ended;
  }
  absl::StatusOr<std::string> loaded;
  if (type != kReply || !ParseReply(reply, &loaded)) {
    return fail(absl::InternalError("unexpected message from an isolated worker loading code"));
  }
  if (!loaded.ok()) {  // the worker is fine; the library is not
    return absl::Status(loaded.status().code(),
                        absl::StrCat("loading in an isolated worker: ", loaded.status().message()));
  }
  call.worker->loaded.insert(hash);
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

absl::Status IsolatedPool::Begin(InFlight& call, std::string_view args, absl::Time deadline,
                                 bool from_peer) {
  const CodeHash& hash = call.fn.scope()->front();
  ARDMA_RETURN_IF_ERROR(EnsureLoaded(call, hash, deadline));
  std::string exec;
  ByteWriter out(&exec);
  out.Bytes(HashBytes(hash));
  out.U64(static_cast<uint64_t>(UnixNanos(deadline)));
  out.U8(from_peer ? kExecFromPeer : 0);
  out.Str16(call.fn.name());
  out.Bytes(args);
  if (options_.spin == absl::ZeroDuration()) {
    // A worker that sleeps between calls runs best where its caller will sleep: on its CPU.
    int cpu = ::sched_getcpu();
    if (cpu >= 0 && cpu != call.worker->cpu) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      if (::sched_setaffinity(call.worker->pid, sizeof set, &set) == 0) call.worker->cpu = cpu;
    }
  }
  if (!call.worker->mailbox->Send(kExec, exec, call.worker->fd)) {
    Release(std::move(call.worker), Outcome::kBroken);
    return absl::InternalError("the isolated worker went away before the call");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> IsolatedPool::Run(const BoundFunction& fn, std::string_view args,
                                              Execution& ex, bool writable) {
  runs_.fetch_add(1, std::memory_order_relaxed);
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Worker> w,
                         Take(KindOf(fn.scope()->front()), writable, ex.deadline));
  InFlight call(this, fn, std::move(w));
  ARDMA_RETURN_IF_ERROR(Begin(call, args, ex.deadline, ex.from_peer));
  return *Await(call, ex, absl::InfiniteFuture());
}

IsolatedPool::Tried IsolatedPool::TryRun(const BoundFunction& fn, std::string_view args,
                                         Execution& ex, bool writable, absl::Time hand_off_at,
                                         absl::StatusOr<std::string>* result,
                                         std::unique_ptr<InFlight>* in_flight) {
  const CodeHash& hash = fn.scope()->front();
  std::unique_ptr<Worker> w = TryTake(writable, hash);
  if (w == nullptr) return Tried::kNotStarted;
  runs_.fetch_add(1, std::memory_order_relaxed);
  inline_runs_.fetch_add(1, std::memory_order_relaxed);
  auto call = std::make_unique<InFlight>(this, fn, std::move(w));
  if (absl::Status begun = Begin(*call, args, ex.deadline, ex.from_peer); !begun.ok()) {
    *result = begun;
    return Tried::kDone;
  }
  std::optional<absl::StatusOr<std::string>> done = Await(*call, ex, hand_off_at);
  if (!done.has_value()) {
    handed_off_.fetch_add(1, std::memory_order_relaxed);
    *in_flight = std::move(call);
    return Tried::kStillRunning;
  }
  *result = *std::move(done);
  return Tried::kDone;
}

absl::StatusOr<std::string> IsolatedPool::Finish(std::unique_ptr<InFlight> call, Execution& ex) {
  return *Await(*call, ex, absl::InfiniteFuture());
}

IsolatedPool::Heard IsolatedPool::Listen(InFlight& call, absl::Time kill_at,
                                         absl::Time hand_off_at,
                                         const std::atomic<bool>* cancelled, Type* type,
                                         std::string* msg, absl::Status* ended) {
  for (;;) {
    absl::Time now = absl::Now();
    if (now >= kill_at) {
      Release(std::move(call.worker), Outcome::kBroken);
      *ended = absl::DeadlineExceededError(absl::StrCat(
          ToAbsl(call.fn.name()), " ran past its deadline: its isolated worker was killed"));
      return Heard::kEnded;
    }
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      Release(std::move(call.worker), Outcome::kBroken);
      *ended = absl::CancelledError("server is shutting down");
      return Heard::kEnded;
    }
    if (now >= hand_off_at) return Heard::kHandOff;
    // A worker on this CPU gets it by yielding; one elsewhere is waited for by sleeping.
    const absl::Duration yield =
        call.worker->cpu == ::sched_getcpu() ? kYield : absl::ZeroDuration();
    switch (call.worker->mailbox->Await(std::min(kill_at, hand_off_at), options_.spin, yield)) {
      case Mailbox::Wait::kTimeout:
        continue;
      case Mailbox::Wait::kPeerDied:
        *ended = Reap(call);
        return Heard::kEnded;
      case Mailbox::Wait::kTurn:
        break;
    }
    if (!call.worker->mailbox->Receive(type, msg, call.worker->fd)) {
      Release(std::move(call.worker), Outcome::kBroken);
      *ended = absl::InternalError("malformed message from an isolated worker");
      return Heard::kEnded;
    }
    return Heard::kMessage;
  }
}

absl::Status IsolatedPool::Reap(InFlight& call) {
  // Its last words, if any: the SIGSYS handler's report of a forbidden call ends what it wrote
  // on its socket (sandbox.h). Only what is there now, and a bounded amount of it.
  std::string said;
  char chunk[4096];
  ssize_t got;
  while (said.size() < 65536 &&
         (got = ::recv(call.worker->fd, chunk, sizeof chunk, MSG_DONTWAIT)) > 0) {
    said.append(chunk, static_cast<size_t>(got));
  }
  std::optional<int> forbidden_call = ForbiddenReport(said);
  int status = 0;
  Release(std::move(call.worker), Outcome::kDied, &status);
  absl::Status died = Died(call.fn.name(), status, Ending(status));
  if (forbidden_call.has_value()) {
    died = absl::PermissionDeniedError(absl::StrCat(
        ToAbsl(call.fn.name()), " made a forbidden system call: ",
        sandbox::SyscallName(*forbidden_call), "; its isolated worker was ended"));
  }
  if (absl::IsPermissionDenied(died)) forbidden_.fetch_add(1, std::memory_order_relaxed);
  return died;
}

bool IsolatedPool::LendCode(InFlight& call, std::string_view msg, absl::Time deadline) {
  ByteReader r(msg);
  std::string_view function;
  if (!r.Str16(&function)) return false;
  absl::StatusOr<BoundFunction> fn = registry_->Resolve(function);
  if (!fn.ok() || !Isolates(*fn)) return false;  // the server runs it (or says it is not there)
  const CodeHash& hash = fn->scope()->front();
  if (KindOf(hash) != call.worker->kind) return false;
  absl::Status loaded = SendCode(call, hash, deadline, 0);
  if (call.worker == nullptr) return true;  // it went away
  // (A failed send: the next Listen sees the worker's death.)
  if (loaded.ok()) {
    call.worker->mailbox->Send(kRun, HashBytes(hash), call.worker->fd);
  } else {
    call.worker->mailbox->Send(kReply, ReplyPayload(loaded, ""), call.worker->fd);
  }
  return true;
}

std::optional<absl::StatusOr<std::string>> IsolatedPool::Await(InFlight& call, Execution& ex,
                                                               absl::Time hand_off_at) {
  LocalContext server(&ex);  // runs what the worker asks of the server
  absl::Time kill_at =
      ex.deadline == absl::InfiniteFuture() ? ex.deadline : ex.deadline + kKillGrace;
  for (;;) {
    Type type;
    std::string msg;
    absl::Status ended;
    switch (Listen(call, kill_at, hand_off_at, ex.cancelled, &type, &msg, &ended)) {
      case Heard::kHandOff:
        return std::nullopt;
      case Heard::kEnded:
        return absl::StatusOr<std::string>(ended);
      case Heard::kMessage:
        break;
    }
    if (type == kDone) {
      absl::StatusOr<std::string> result;
      bool retire = false;
      bool well_formed = ReadDone(msg, &ex.counts, &result, &retire);
      Release(std::move(call.worker), !well_formed ? Outcome::kBroken
                                      : retire     ? Outcome::kRetired
                                                   : Outcome::kHealthy);
      if (!well_formed) return absl::InternalError("malformed answer from an isolated worker");
      return result;
    }
    if (type == kCall && LendCode(call, msg, ex.deadline)) {
      if (call.worker == nullptr) return absl::InternalError("the isolated worker went away");
      continue;
    }
    absl::StatusOr<std::string> answer;
    if (!AnswerWorker(type, msg, server, &answer)) {
      Release(std::move(call.worker), Outcome::kBroken);
      return absl::InternalError("unexpected message from an isolated worker");
    }
    std::string reply = ReplyPayload(answer.status(), answer.ok() ? *answer : "");
    // A failed send (a long reply to a worker that is gone): the next Listen sees its death.
    call.worker->mailbox->Send(kReply, reply, call.worker->fd);
  }
}

}  // namespace ardma
