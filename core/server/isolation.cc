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
#include "core/spawn_environment.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/wire/frame.h"

namespace ardma {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

// heap size:owner token:owner table:server pid:rw|ro (the heap's mapping)
constexpr char kWorkerVariable[] = "ARDMA_ISOLATED_WORKER";
// The worker's sandbox::Policy (Encode); absent: it runs unconfined.
constexpr char kSandboxVariable[] = "ARDMA_ISOLATED_SANDBOX";
// The JVM's settings: libjvm, classpath, then each option, separated by kJvmSeparator.
constexpr char kJvmVariable[] = "ARDMA_ISOLATED_JVM";
constexpr char kJvmSeparator = '\x1f';
constexpr int kChannelFd = 3, kHeapFd = 4;
// How long past its deadline a worker may take to answer before it is killed (it checks the
// deadline itself on memory operations, and answers DEADLINE_EXCEEDED).
constexpr absl::Duration kKillGrace = absl::Milliseconds(100);
constexpr absl::Duration kSpawnTimeout = absl::Seconds(10);
constexpr int kMaxDepth = 32;

std::atomic<bool> g_can_be_worker{false};

// Messages: len:u32 (type and payload) type:u8 payload.
enum Type : uint8_t {
  // server -> worker
  kLoad = 1,   // hash:u8[32] kind:u8 name:str16 ndeps:u16 dep:u8[32]... code
  kExec = 2,   // hash:u8[32] deadline_unix_ns:u64 function:str16 args
  kReply = 3,  // status:u16 payload (the answer to a worker's request)
  kReady = 4,  // (worker -> server, once at start)
  // worker -> server
  kDone = 10,     // status:u16 counts:u64[7] flags:u8 payload (result, or the error's message)
  kPark = 11,     // resumable:u8 resume_at_unix_ns:u64 key:str16 resume_args
  kResume = 12,   // key
  kWake = 13,     // key:str16 result
  kOnClose = 14,  // key:str16 function:str16 args
  kCall = 15,     // function:str16 args
  kForbidden = 16,  // nr:u32 (from the SIGSYS handler, as the worker ends: sandbox.h)
};
constexpr uint8_t kRetireFlag = 1;  // kDone's flags: the worker has used half its CPU time

bool SendMessage(int fd, Type type, std::string_view payload) {
  std::string head(5, '\0');
  uint32_t len = static_cast<uint32_t>(payload.size() + 1);
  std::memcpy(head.data(), &len, 4);
  head[4] = static_cast<char>(type);
  return SendAll(fd, head).ok() && SendAll(fd, payload).ok();
}

bool ReceiveMessage(int fd, Type* type, std::string* payload) {
  char head[5];
  if (!RecvExactly(fd, head, sizeof head).ok()) return false;
  uint32_t len;
  std::memcpy(&len, head, 4);
  if (len == 0) return false;
  *type = static_cast<Type>(head[4]);
  payload->resize(len - 1);
  return RecvExactly(fd, payload->data(), payload->size()).ok();
}

std::string StatusPayload(const absl::Status& status, std::string_view ok_payload) {
  std::string out;
  ByteWriter w(&out);
  w.U16(wire::StatusToWire(status));
  w.Bytes(status.ok() ? std::string(ok_payload) : wire::StatusPayload(status));
  return out;
}

int64_t UnixNanos(absl::Time t) {
  if (t == absl::InfiniteFuture()) return INT64_MAX;
  return absl::ToUnixNanos(t);
}
absl::Time FromUnixNanos(int64_t ns) {
  return ns == INT64_MAX ? absl::InfiniteFuture() : absl::FromUnixNanos(ns);
}

// ---- The worker ----

// The worker's way to the server: one request, one reply, on the one channel.
class WorkerLink : public ServerLink {
 public:
  explicit WorkerLink(int fd) : fd_(fd) {}

  // A yes/no answer: one byte, 1 for yes.
  static bool IsTrue(std::string_view answer) { return answer.size() == 1 && answer[0] == 1; }

  absl::Status Park(std::string_view key, const ParkOptions& options) override {
    std::string p;
    ByteWriter w(&p);
    w.U8(options.resumable ? 1 : 0);
    w.U64(static_cast<uint64_t>(UnixNanos(options.resume_at)));
    w.Str16(key);
    w.Bytes(options.resume_args);
    return Ask(kPark, p).status();
  }
  absl::StatusOr<bool> Resume(std::string_view key) override {
    ARDMA_ASSIGN_OR_RETURN(std::string r, Ask(kResume, key));
    return IsTrue(r);
  }
  absl::StatusOr<bool> Wake(std::string_view key, std::string_view result) override {
    std::string p;
    ByteWriter w(&p);
    w.Str16(key);
    w.Bytes(result);
    ARDMA_ASSIGN_OR_RETURN(std::string r, Ask(kWake, p));
    return IsTrue(r);
  }
  absl::Status OnClose(std::string_view key, std::string_view function,
                       std::string_view args) override {
    std::string p;
    ByteWriter w(&p);
    w.Str16(key);
    w.Str16(function);
    w.Bytes(args);
    return Ask(kOnClose, p).status();
  }
  absl::StatusOr<std::string> Call(std::string_view function, std::string_view args) override {
    std::string p;
    ByteWriter w(&p);
    w.Str16(function);
    w.Bytes(args);
    return Ask(kCall, p);
  }

 private:
  absl::StatusOr<std::string> Ask(Type type, std::string_view payload) {
    Type got;
    std::string reply;
    if (!SendMessage(fd_, type, payload) || !ReceiveMessage(fd_, &got, &reply) || got != kReply) {
      std::_Exit(3);  // the server is gone
    }
    ByteReader r(reply);
    uint16_t code;
    if (!r.U16(&code)) std::_Exit(3);
    std::string_view rest(reply.data() + 2, reply.size() - 2);
    if (code != 0) return wire::StatusFromWire(code, rest);
    return std::string(rest);
  }
  const int fd_;
};

// Confines the worker (sandbox.h) once what it needs from files is loaded; ends it if it cannot.
// (A JVM starts between Restrict and Filter: it reads its files, which Landlock's rules for the
// kJvm profile allow, and starts threads, which inherit the restrictions.)
void Confine(const sandbox::Policy& policy, const JvmOptions& jvm_options) {
  Sha256("");  // OpenSSL reads its configuration file on first use
  std::string report(5, '\0');
  uint32_t len = 5;  // type and nr
  std::memcpy(report.data(), &len, 4);
  report[4] = static_cast<char>(kForbidden);
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "isolated worker: cannot confine itself: %s\n", s.ToString().c_str());
    std::_Exit(2);
  };
  std::string notes;
  absl::Status s = sandbox::Restrict(policy, &notes);
  if (s.ok() && policy.profile == sandbox::Profile::kJvm) {
    JvmOptions confined = jvm_options;  // no attach listener: it would want a socket
    confined.options.push_back("-XX:+DisableAttachMechanism");
    s = StartJvm(confined);
  }
  if (s.ok()) s = sandbox::Filter(policy, {kChannelFd, report});
  if (!s.ok()) fail(s);
}

bool PastHalfCpu(uint64_t cpu_seconds) {
  if (cpu_seconds == 0) return false;
  timespec used{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  return static_cast<uint64_t>(used.tv_sec) * 2 >= cpu_seconds;
}

// A kLoad (after its hash, read into `r`): the library into the worker's registry. False if the
// message is malformed.
bool LoadInWorker(CodeRegistry& registry, const CodeHash& hash, ByteReader& r) {
  uint8_t kind;
  std::string_view name;
  uint16_t ndeps;
  if (!r.U8(&kind) || !r.Str16(&name) || !r.U16(&ndeps)) return false;
  LoadAuthority by;
  for (uint16_t i = 0; i < ndeps; ++i) {
    std::string_view d;
    if (!r.Bytes(32, &d)) return false;
    CodeHash dep;
    std::memcpy(dep.data(), d.data(), 32);
    by.deps.push_back(dep);
  }
  absl::StatusOr<CodeHash> loaded =
      registry.Load(static_cast<wire::CodeKind>(kind), name, r.Rest(), by);
  if (!loaded.ok()) {
    std::fprintf(stderr, "isolated worker: loading %s (%s): %s\n", std::string(name).c_str(),
                 wire::HashToHex(hash).c_str(), loaded.status().ToString().c_str());
  }
  return true;
}

// The kDone of a call's `result` and its memory-operation counts.
std::string DoneMessage(const absl::StatusOr<std::string>& result, const ActiveOpCounts& c,
                        bool retire) {
  std::string done;
  ByteWriter w(&done);
  w.U16(wire::StatusToWire(result.status()));
  for (uint64_t v :
       {c.reads, c.writes, c.cas, c.fetch_adds, c.bytes_read, c.bytes_written, c.calls}) {
    w.U64(v);
  }
  w.U8(retire ? kRetireFlag : 0);
  w.Bytes(result.ok() ? *result : wire::StatusPayload(result.status()));
  return done;
}

[[noreturn]] void WorkerMain(uint64_t heap_size, bool writable, LockOwner owner,
                             const JvmOptions& jvm_options,
                             const std::optional<sandbox::Policy>& policy) {
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<Region>> heap =
      Region::MapFile(kHeapFd, heap_size, /*read_only=*/!writable);
  if (!heap.ok()) {
    std::fprintf(stderr, "isolated worker: %s\n", heap.status().ToString().c_str());
    std::_Exit(2);
  }
  RegionTable regions;
  regions.Add(*std::move(heap));
  CodeRegistry registry;
  registry.SetLoader(wire::CodeKind::kNative, std::make_unique<NativeLoader>(/*trial=*/false));
  if (std::unique_ptr<CodeLoader> jvm = NewJvmLoader(jvm_options)) {
    registry.SetLoader(wire::CodeKind::kJvm, std::move(jvm));
  }
  WorkerLink link(kChannelFd);
  if (policy) Confine(*policy, jvm_options);
  const uint64_t cpu_seconds = policy ? policy->cpu_seconds : 0;
  if (!SendMessage(kChannelFd, kReady, "")) std::_Exit(3);
  Type type;
  std::string msg;
  while (ReceiveMessage(kChannelFd, &type, &msg)) {
    ByteReader r(msg);
    std::string_view hash_bytes;
    if (!r.Bytes(32, &hash_bytes)) std::_Exit(4);
    CodeHash hash;
    std::memcpy(hash.data(), hash_bytes.data(), 32);
    if (type == kLoad) {
      if (!LoadInWorker(registry, hash, r)) std::_Exit(4);
      continue;
    }
    uint64_t deadline_ns;
    std::string_view function;
    if (type != kExec || !r.U64(&deadline_ns) || !r.Str16(&function)) std::_Exit(4);
    Execution ex;
    ex.regions = &regions;
    ex.registry = &registry;
    ex.deadline = FromUnixNanos(static_cast<int64_t>(deadline_ns));
    ex.link = &link;
    ex.owner = owner;
    absl::StatusOr<BoundFunction> fn = registry.Resolve(hash, function);
    absl::StatusOr<std::string> result = fn.ok() ? LocalContext::Run(&ex, *fn, r.Rest())
                                                 : absl::StatusOr<std::string>(fn.status());
    if (!SendMessage(kChannelFd, kDone, DoneMessage(result, ex.counts, PastHalfCpu(cpu_seconds)))) {
      break;
    }
  }
  std::_Exit(0);
}

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

void RunIsolatedWorkerIfAsked() {
  g_can_be_worker.store(true);
  const char* spec = std::getenv(kWorkerVariable);
  if (spec == nullptr) return;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  uint64_t size = 0;
  LockOwner owner;
  pid_t server = 0;
  if (parts.size() != 5 || !absl::SimpleAtoi(parts[0], &size) ||
      !absl::SimpleAtoi(parts[1], &owner.token) || !absl::SimpleAtoi(parts[2], &owner.table) ||
      !absl::SimpleAtoi(parts[3], &server) || (parts[4] != "rw" && parts[4] != "ro")) {
    std::fprintf(stderr, "%s is malformed\n", kWorkerVariable);
    std::_Exit(2);
  }
  // A worker never outlives its server, even one SIGKILLed while the worker runs a loop that
  // never reads the socket again.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != server) std::_Exit(0);
  std::optional<sandbox::Policy> policy;
  if (const char* s = std::getenv(kSandboxVariable); s != nullptr && *s != '\0') {
    absl::StatusOr<sandbox::Policy> decoded = sandbox::Policy::Decode(s);
    if (!decoded.ok()) {
      std::fprintf(stderr, "%s\n", decoded.status().ToString().c_str());
      std::_Exit(2);
    }
    policy = *std::move(decoded);
  }
  JvmOptions jvm;
  if (const char* j = std::getenv(kJvmVariable); j != nullptr) {
    std::vector<std::string> fields = absl::StrSplit(j, kJvmSeparator);
    if (fields.size() >= 2) {
      jvm.libjvm = fields[0];
      jvm.classpath = fields[1];
      jvm.options.assign(fields.begin() + 2, fields.end());
    }
  }
  WorkerMain(size, parts[4] == "rw", owner, jvm, policy);
}

// ---- The server's side ----

absl::StatusOr<std::unique_ptr<IsolatedPool>> IsolatedPool::Start(const IsolationOptions& options,
                                                                  const CodeRegistry* registry,
                                                                  OwnerTable* owners) {
  if (!g_can_be_worker.load()) {
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
    std::string reply = StatusPayload(answer.status(), answer.ok() ? *answer : "");
    if (!SendMessage(w->fd, kReply, reply)) continue;  // it died: the next poll sees it
  }
}

}  // namespace ardma
