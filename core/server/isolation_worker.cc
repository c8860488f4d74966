// The isolated worker's side (isolation.h): ardmad started again, confined (sandbox.h), running
// the server's calls over its own mapping of the heap and asking the server for the rest.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/active/active_library.h"
#include "core/active/native_loader.h"
#include "core/active/sandbox.h"
#include "core/memory/region.h"
#include "core/server/isolation.h"
#include "core/server/isolation_channel.h"
#include "core/server/isolation_mailbox.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/wire/frame.h"
#include "core/wire/messages.h"

namespace ardma {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

std::atomic<bool> g_can_be_worker{false};

// ---- The worker ----

// A kLoad (after its hash, read into `r`): the library into the worker's registry. False if the
// message is malformed; otherwise how loading went in *loaded_status.
bool LoadInWorker(CodeRegistry& registry, ByteReader& r, absl::Status* loaded_status) {
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
  *loaded_status = loaded.status();
  return true;
}

// Answers a kLoad: false if it was malformed.
bool AnswerLoad(CodeRegistry& registry, Mailbox& box, std::string_view msg) {
  ByteReader r(msg);
  std::string_view hash;
  absl::Status loaded;
  if (!r.Bytes(32, &hash) || !LoadInWorker(registry, r, &loaded)) return false;
  box.Send(kReply, ReplyPayload(loaded, ""), kChannelFd);  // (if the server is gone, so is all)
  return true;
}

// The worker's way to the server: one request, one reply, on the one channel.
class WorkerLink : public ServerLink {
 public:
  WorkerLink(Mailbox* mailbox, absl::Duration spin, CodeRegistry* registry)
      : mailbox_(mailbox), spin_(spin), registry_(registry) {}

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
  absl::StatusOr<std::string> Call(std::string_view function, std::string_view args,
                                   std::optional<CodeHash>* run_here) override {
    std::string p;
    ByteWriter w(&p);
    w.Str16(function);
    w.Bytes(args);
    return Ask(kCall, p, run_here);
  }

 private:
  // The server's kReply to a request (or, for a kCall, its kRun: the hash in *run_here), serving
  // the kLoads that come before it.
  absl::StatusOr<std::string> Ask(Type type, std::string_view payload,
                                  std::optional<CodeHash>* run_here = nullptr) {
    if (!mailbox_->Send(type, payload, kChannelFd)) std::_Exit(3);
    for (;;) {
      Type got;
      std::string reply;
      if (mailbox_->Await(absl::InfiniteFuture(), spin_) != Mailbox::Wait::kTurn ||
          !mailbox_->Receive(&got, &reply, kChannelFd)) {
        std::_Exit(3);  // the server is gone
      }
      if (got == kLoad && run_here != nullptr) {
        if (!AnswerLoad(*registry_, *mailbox_, reply)) std::_Exit(4);
        continue;
      }
      if (got == kRun && run_here != nullptr && reply.size() == 32) {
        CodeHash hash;
        std::memcpy(hash.data(), reply.data(), 32);
        *run_here = hash;
        return std::string();
      }
      absl::StatusOr<std::string> answer;
      if (got != kReply || !ParseReply(reply, &answer)) std::_Exit(4);  // it broke the protocol
      return answer;
    }
  }
  Mailbox* const mailbox_;
  const absl::Duration spin_;
  CodeRegistry* const registry_;
};

// Confines the worker (sandbox.h) once what it needs from files is loaded; ends it if it cannot.
// (A JVM starts between Restrict and Filter: it reads its files, which Landlock's rules for the
// kJvm profile allow, and starts threads, which inherit the restrictions.)
void Confine(const sandbox::Policy& policy, const JvmOptions& jvm_options) {
  Sha256("");  // OpenSSL reads its configuration file on first use
  const std::string report = ForbiddenReportHead();
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

// Whether the worker has used half its CPU time (`seconds`; 0: no limit). The process's CPU clock
// is a system call, so it is read at most every kCheckEvery of wall time (a vDSO clock): the
// slack that leaves is far below the half of the limit the worker keeps in reserve.
class CpuBudget {
 public:
  explicit CpuBudget(uint64_t seconds) : seconds_(seconds) {}
  bool HalfUsed() {
    if (seconds_ == 0) return false;
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
    if (checked_ns_ != 0 && ns - checked_ns_ < kCheckEveryNs) return false;
    checked_ns_ = ns;
    timespec used{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
    return static_cast<uint64_t>(used.tv_sec) * 2 >= seconds_;
  }

 private:
  static constexpr int64_t kCheckEveryNs = 100'000'000;  // 100 ms
  const uint64_t seconds_;
  int64_t checked_ns_ = 0;
};

// The function of the last call, bound once: a worker mostly runs one function over and over.
class LastFunction {
 public:
  absl::StatusOr<const BoundFunction*> Resolve(const CodeRegistry& registry, const CodeHash& hash,
                                               std::string_view name) {
    if (!fn_.has_value() || hash_ != hash || name_ != name) {
      fn_.reset();
      ARDMA_ASSIGN_OR_RETURN(BoundFunction fn, registry.Resolve(hash, name));
      fn_.emplace(std::move(fn));
      hash_ = hash;
      name_ = std::string(name);
    }
    return &*fn_;
  }

 private:
  std::optional<BoundFunction> fn_;
  CodeHash hash_{};
  std::string name_;
};

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

[[noreturn]] void WorkerMain(uint64_t heap_size, bool writable, absl::Duration spin,
                             LockOwner owner, const JvmOptions& jvm_options,
                             const std::optional<sandbox::Policy>& policy) {
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<Mailbox>> mailbox = Mailbox::Map(kMailboxFd, Mailbox::kWorker);
  if (!mailbox.ok()) {
    std::fprintf(stderr, "isolated worker: %s\n", mailbox.status().ToString().c_str());
    std::_Exit(2);
  }
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
  WorkerLink link(mailbox->get(), spin, &registry);
  if (policy) Confine(*policy, jvm_options);  // (closes kMailboxFd: it stays mapped)
  CpuBudget cpu(policy ? policy->cpu_seconds : 0);
  if (!SendMessage(kChannelFd, kReady, "")) std::_Exit(3);
  Mailbox& box = **mailbox;
  LastFunction last;
  Type type;
  std::string msg;
  while (box.Await(absl::InfiniteFuture(), spin) == Mailbox::Wait::kTurn &&
         box.Receive(&type, &msg, kChannelFd)) {
    ByteReader r(msg);
    std::string_view hash_bytes;
    if (!r.Bytes(32, &hash_bytes)) std::_Exit(4);
    CodeHash hash;
    std::memcpy(hash.data(), hash_bytes.data(), 32);
    if (type == kLoad) {
      if (!AnswerLoad(registry, box, msg)) std::_Exit(4);
      continue;
    }
    uint64_t deadline_ns;
    uint8_t flags;
    std::string_view function;
    if (type != kExec || !r.U64(&deadline_ns) || !r.U8(&flags) || !r.Str16(&function)) {
      std::_Exit(4);
    }
    Execution ex;
    ex.regions = &regions;
    ex.registry = &registry;
    ex.deadline = FromUnixNanos(static_cast<int64_t>(deadline_ns));
    ex.link = &link;
    ex.owner = owner;
    ex.from_peer = (flags & kExecFromPeer) != 0;
    absl::StatusOr<const BoundFunction*> fn = last.Resolve(registry, hash, function);
    absl::StatusOr<std::string> result = fn.ok() ? LocalContext::Run(&ex, **fn, r.Rest())
                                                 : absl::StatusOr<std::string>(fn.status());
    if (!box.Send(kDone, DoneMessage(result, ex.counts, cpu.HalfUsed()), kChannelFd)) {
      break;
    }
  }
  std::_Exit(0);
}

}  // namespace

bool CanBeWorker() { return g_can_be_worker.load(); }

void RunIsolatedWorkerIfAsked() {
  g_can_be_worker.store(true);
  const char* spec = std::getenv(kWorkerVariable);
  if (spec == nullptr) return;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  uint64_t size = 0;
  LockOwner owner;
  pid_t server = 0;
  int64_t spin_ns = 0;
  if (parts.size() != 6 || !absl::SimpleAtoi(parts[0], &size) ||
      !absl::SimpleAtoi(parts[1], &owner.token) || !absl::SimpleAtoi(parts[2], &owner.table) ||
      !absl::SimpleAtoi(parts[3], &server) || (parts[4] != "rw" && parts[4] != "ro") ||
      !absl::SimpleAtoi(parts[5], &spin_ns)) {
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
  WorkerMain(size, parts[4] == "rw", absl::Nanoseconds(spin_ns), owner, jvm, policy);
}

}  // namespace ardma
