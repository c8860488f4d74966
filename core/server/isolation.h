// ardmad --isolate: native active code runs in worker processes that map the same heap, so a
// function that crashes (null dereference, abort) or never returns costs its request and a worker
// restart, not the server.
//
// Each worker is ardmad started again (/proc/self/exe, told by its environment to be a worker),
// with the heap's file (a memfd, or the --memory-file) and one end of a socket pair. It keeps its
// own CodeRegistry: before a call the server sends it the library and what the library was built
// against, once. It runs the function over a LocalContext on its own mapping of the heap; Park,
// Resume, Wake, OnClose and calls of code it does not have (Java, linked libraries) go back to the
// server over the socket and run there on the request's Execution. Each worker is a lock owner of
// its own (OwnerTable), so lock words a crashed worker held are taken over like a dead client's.
//
// The server side: the thread running an EXECUTE takes an idle worker, passes it the call through
// the worker's mailbox in shared memory (isolation_mailbox.h) and serves the worker's requests
// until the answer comes. An I/O thread does so only for a function known to be short and only
// with an idle worker that already has the code (TryRun); if the call still runs when an I/O
// thread's time is up, the wait goes on on a pool thread (Finish), not the call. The worker dying
// wakes the waiter (DeathWatch) and is INTERNAL ("... crashed its isolated worker: Segmentation
// fault"); the deadline passing first kills it (DEADLINE_EXCEEDED). Either way a new worker is
// started for the next call.
//
// Java code runs in workers of its own, each with a JVM of its own: a Java loop that catches
// ThreadDeath (so the JVM's own deadline cannot stop it) is killed with its worker. A call by name
// outside the function's own library and dependencies goes to the server, which sends shipped
// code of the worker's kind to the worker to run there (kRun) and runs the rest itself: linked
// libraries (built into ardmad), and code of the other kind.
//
// Confinement (sandbox.h): a worker drops to an unprivileged user, closes every descriptor but its
// channel and the heap's file, and installs a seccomp allow-list and a Landlock ruleset before it
// reads its first call (a Java worker starts its JVM first, and has a wider list). A forbidden
// system call ends the worker: the request gets PERMISSION_DENIED naming the call, and the next
// call gets a new worker. RLIMIT_AS bounds a native worker's address space (the heap plus
// `address_space_slack`), RLIMIT_CPU every worker's CPU time; a worker that has used half of it
// asks to be retired after its answer, so a long-lived server's calls do not meet the limit.
#ifndef ARDMA_CORE_SERVER_ISOLATION_H_
#define ARDMA_CORE_SERVER_ISOLATION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/active/code_registry.h"
#include "core/active/jvm/jvm_loader.h"
#include "core/active/local_context.h"
#include "core/active/sandbox.h"
#include "core/server/isolation_channel.h"
#include "core/server/isolation_mailbox.h"
#include "core/server/owner_table.h"

namespace ardma {

// If this process was started as an isolated worker, runs it and exits; otherwise returns, and
// records that this program can be one (IsolatedPool::Start refuses otherwise: a worker is this
// same program started again). ardmad's main calls it first.
void RunIsolatedWorkerIfAsked();

struct IsolationOptions {
  int workers = 2;   // processes (at most this many isolated calls at once)
  int heap_fd = -1;  // the heap's file: a memfd or the memory file (kept open by the pool)
  uint64_t heap_size = 0;
  JvmOptions jvm;  // for Java code in the workers (each Java worker starts its own JVM)
  bool confine = true;                // the sandbox; false: workers run as the server does
  std::optional<sandbox::User> user;  // the user workers run as (the server must be root)
  uint64_t cpu_seconds = 3600;        // RLIMIT_CPU of each worker
  uint64_t address_space_slack = uint64_t{4} << 30;  // a native worker's RLIMIT_AS beyond the heap
  // How long both sides spin for their turn before they sleep (--isolate-spin): zero for a
  // machine without cores to spare.
  absl::Duration spin;
};

class IsolatedPool {
  struct Worker;  // a worker process (below)

 public:
  static absl::StatusOr<std::unique_ptr<IsolatedPool>> Start(const IsolationOptions& options,
                                                             const CodeRegistry* registry,
                                                             OwnerTable* owners);
  ~IsolatedPool();  // kills the workers

  // Whether `fn` runs in a worker (loaded code whose bytes the registry kept).
  bool Isolates(const BoundFunction& fn) const;
  // Runs `fn(args)` in a worker, serving the worker's requests over `ex`; adds the worker's memory
  // operations to ex.counts. `writable`: whether the caller may write memory one-sidedly; if not,
  // the worker maps the heap read-only, so not even a pointer from View writes it. May wait for a
  // worker to be free or started.
  absl::StatusOr<std::string> Run(const BoundFunction& fn, std::string_view args, Execution& ex,
                                  bool writable = true);

  // A call running in its worker, which may be handed from one thread to another. Dropping one
  // ends its worker.
  struct InFlight {
    InFlight(IsolatedPool* p, const BoundFunction& f, std::unique_ptr<Worker> w)
        : pool(p), fn(f), worker(std::move(w)) {}
    ~InFlight();
    IsolatedPool* const pool;
    const BoundFunction fn;
    std::unique_ptr<Worker> worker;  // null once released
  };
  enum class Tried { kNotStarted, kDone, kStillRunning };
  // Run for a thread that must not wait long (an I/O thread): kNotStarted, having done nothing,
  // unless an idle worker of the right sort already has the code; kDone with *result; or
  // kStillRunning at `hand_off_at`, the call in *in_flight for Finish on a thread that may wait.
  Tried TryRun(const BoundFunction& fn, std::string_view args, Execution& ex, bool writable,
               absl::Time hand_off_at, absl::StatusOr<std::string>* result,
               std::unique_ptr<InFlight>* in_flight);
  // Waits for the end of a call TryRun left running, serving its requests over `ex`.
  absl::StatusOr<std::string> Finish(std::unique_ptr<InFlight> call, Execution& ex);

  uint64_t runs() const { return runs_.load(std::memory_order_relaxed); }
  uint64_t restarts() const { return restarts_.load(std::memory_order_relaxed); }
  uint64_t forbidden() const { return forbidden_.load(std::memory_order_relaxed); }
  uint64_t retired() const { return retired_.load(std::memory_order_relaxed); }
  uint64_t inline_runs() const { return inline_runs_.load(std::memory_order_relaxed); }
  uint64_t handed_off() const { return handed_off_.load(std::memory_order_relaxed); }

 private:
  using Kind = sandbox::Profile;  // what code a worker runs: native or Java
  struct Worker {
    Kind kind = Kind::kNative;
    bool writable = true;  // maps the heap read-write
    pid_t pid = -1;
    int fd = -1;                       // its socket: starting, long payloads, last words
    std::unique_ptr<Mailbox> mailbox;  // calls and answers
    uint64_t watch = 0;                // its DeathWatch handle (0: not watched)
    int cpu = -1;                      // the one CPU it may run on (-1: any)
    LockOwner owner;
    absl::flat_hash_set<CodeHash> loaded;
  };

  IsolatedPool(const IsolationOptions& options, const CodeRegistry* registry, OwnerTable* owners)
      : options_(options), registry_(registry), owners_(owners) {}
  absl::StatusOr<std::unique_ptr<Worker>> Spawn(Kind kind, bool writable);
  // What kind of worker runs the library `hash`.
  Kind KindOf(const CodeHash& hash) const;
  // The policy a worker of `kind` confines itself with.
  sandbox::Policy PolicyFor(Kind kind) const;
  // Ends a worker (SIGKILL, reaped); returns how it ended, for people (and its waitpid status in
  // *status).
  std::string End(std::unique_ptr<Worker> worker, bool kill, int* status = nullptr);
  // An idle worker of `kind` and `writable`, or a new one (ending an idle one of another sort if
  // the pool is full).
  absl::StatusOr<std::unique_ptr<Worker>> Take(Kind kind, bool writable, absl::Time deadline);
  void Give(std::unique_ptr<Worker> worker);
  // An idle worker of `writable` that has the library `hash` (so is of its kind), if there is one.
  std::unique_ptr<Worker> TryTake(bool writable, const CodeHash& hash);
  // How a call left its worker: to be given back, or ended (killed; found dead; retired).
  enum class Outcome { kHealthy, kBroken, kDied, kRetired };
  // Gives `worker` back or ends it (its waitpid status in *status), and frees its place.
  void Release(std::unique_ptr<Worker> worker, Outcome outcome, int* status = nullptr);
  // Passes the call to its worker (loading the library first if the worker lacks it); on failure
  // the worker is released and call.worker is null.
  absl::Status Begin(InFlight& call, std::string_view args, absl::Time deadline, bool from_peer);
  // Serves the worker's requests until its answer, its death or the deadline (the worker is
  // released then), or until `hand_off_at` (nullopt: the call still runs, and keeps its worker).
  std::optional<absl::StatusOr<std::string>> Await(InFlight& call, Execution& ex,
                                                   absl::Time hand_off_at);
  // The worker's next message, waiting until `kill_at` (nullopt at `hand_off_at`, or with the
  // call's end in *ended: the worker is released then).
  enum class Heard { kMessage, kHandOff, kEnded };
  Heard Listen(InFlight& call, absl::Time kill_at, absl::Time hand_off_at,
               const std::atomic<bool>* cancelled, Type* type, std::string* msg,
               absl::Status* ended);
  // The status of a call whose worker died (reaped and its place freed).
  absl::Status Reap(InFlight& call);
  // Sends the library `hash` (its dependencies first) unless the worker has it; on failure the
  // worker is released and call.worker is null.
  absl::Status EnsureLoaded(InFlight& call, const CodeHash& hash, absl::Time deadline);
  // EnsureLoaded's work, but a library the worker refuses leaves the worker with the call.
  absl::Status SendCode(InFlight& call, const CodeHash& hash, absl::Time deadline, int depth);
  // A worker's kCall (`msg`) of shipped code of its kind: the code sent to it (SendCode), then
  // kRun, so it runs the function itself, not the server; false for anything else (the server
  // answers). call.worker is null after if the worker went away.
  bool LendCode(InFlight& call, std::string_view msg, absl::Time deadline);

  const IsolationOptions options_;
  const CodeRegistry* const registry_;
  OwnerTable* const owners_;
  std::atomic<uint64_t> runs_{0}, restarts_{0}, forbidden_{0}, retired_{0};
  std::atomic<uint64_t> inline_runs_{0}, handed_off_{0};  // TryRun's runs, and its hand-offs
  int read_only_heap_fd_ = -1;  // the heap's file opened for reading: for read-only workers
  std::unique_ptr<DeathWatch> watch_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Worker>> idle_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_ISOLATION_H_
