// Context: the interface active code is written against (the Active RDMA paper's ActiveRDMA).
//
// The same function runs over a LocalContext (on the server, next to the data: every operation is a
// memory access) or a RemoteContext (on a client: every operation is a round trip, batched where
// the caller batches). Addresses are byte offsets into a region; region 0 is the heap.
//
//   absl::StatusOr<std::string> Sum(ardma::Context& ctx, std::string_view args) {
//     ARDMA_ASSIGN_OR_RETURN(uint64_t head, ctx.ReadU64(8));
//     ...
//   }
//
// Semantics shared by all implementations:
//  - Every access is bounds-checked (OutOfRange); CAS and FETCH_ADD need 8-byte alignment
//    (InvalidArgument) and are atomic with respect to every other client and active function.
//  - Plain reads and writes may tear, as with real RDMA; use lock words or versions for
//  consistency.
//  - A batch is validated whole before any entry is applied.
//  - A CAS that loses is a result ({swapped = false, observed}), not an error.
// A Context is used by one thread at a time (the one running the function).
#ifndef ARDMA_CORE_CONTEXT_CONTEXT_H_
#define ARDMA_CORE_CONTEXT_CONTEXT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/wire/messages.h"

namespace ardma {

using wire::kHeapRegion;
using wire::RegionId;

struct CasResult {
  bool swapped = false;
  uint64_t observed = 0;  // the word's value before the operation
};

struct ReadOp {
  uint64_t addr = 0;
  std::span<char> out;  // filled with out.size() bytes from addr
  RegionId region = kHeapRegion;
};

// How a parked request continues if no Wake answers it (see Context::Park).
struct ParkOptions {
  // A resumable request is run again — its top-level function, from the start, with
  // `resume_args` as its arguments, on a worker thread — at `resume_at` if no Wake came first, or
  // as soon as some function calls Resume(key). The new run may answer, or park again. A request
  // that is not resumable just waits for a Wake or its deadline.
  bool resumable = false;
  absl::Time resume_at = absl::InfiniteFuture();
  std::string_view resume_args;
};

struct WriteOp {
  uint64_t addr = 0;
  std::string_view data;
  RegionId region = kHeapRegion;
};

// Who takes lock words through a context, so that a waiter can tell a holder that died from one
// that is only slow (services/lock_word.h). ardmad keeps a table of owners in the heap: one slot
// per open connection and one for itself, each a word 2 * generation + live that the server bumps
// when the connection opens and again when it closes (and for every slot when it restarts). A
// token names a slot and the generation it had while live (core/context/lock_owner.h).
struct LockOwner {
  uint64_t token = 0;  // 0: anonymous (no server tracks this owner; its words are never taken)
  uint64_t table = 0;  // heap address of the owner table
};

// Where a server-to-server call goes (Context::CallPeer): the member of the cluster that owns
// `slot` (by the caller's map), or the member whose id is `member`.
struct PeerTarget {
  static PeerTarget Slot(uint32_t slot) { return {slot, {}}; }
  static PeerTarget Member(std::string id) { return {std::nullopt, std::move(id)}; }
  std::optional<uint32_t> slot;
  std::string member;  // when there is no slot
};

// How a server calls its cluster's other members, injected into the server from above (the
// cluster layer implements it; core/server only holds it). Thread-safe.
class PeerCaller {
 public:
  virtual ~PeerCaller() = default;
  // Runs `function(args)` on `target` under the server's own credentials as a peer's call, ending
  // by `deadline`: DEADLINE_EXCEEDED if it does not answer by then, UNAVAILABLE naming the member
  // if it is down or unreachable, else the callee's result or status.
  virtual absl::StatusOr<std::string> Call(const PeerTarget& target, std::string_view function,
                                           std::string_view args, absl::Time deadline) = 0;
  // Applies this primary's replicated write `function(args)` on its replica `member`
  // (wire::kFlagReplica: `args` start with the write's order, core/server/slot_replication.h).
  virtual absl::StatusOr<std::string> Replicate(const std::string& member,
                                                std::string_view function, std::string_view args,
                                                absl::Time deadline) = 0;
};

class Context {
 public:
  virtual ~Context() = default;

  // Batches: one round trip over RemoteContext.
  absl::Status ReadBatch(std::span<const ReadOp> ops) { return DoReadBatch(ops); }
  absl::Status WriteBatch(std::span<const WriteOp> ops) { return DoWriteBatch(ops); }

  absl::Status Read(uint64_t addr, std::span<char> out, RegionId region = kHeapRegion);
  absl::StatusOr<std::string> Read(uint64_t addr, size_t len, RegionId region = kHeapRegion);
  absl::Status Write(uint64_t addr, std::string_view data, RegionId region = kHeapRegion);
  absl::StatusOr<uint64_t> ReadU64(uint64_t addr, RegionId region = kHeapRegion);
  absl::Status WriteU64(uint64_t addr, uint64_t value, RegionId region = kHeapRegion);

  absl::StatusOr<CasResult> CompareAndSwap(uint64_t addr, uint64_t expected, uint64_t desired,
                                           RegionId region = kHeapRegion) {
    return DoCompareAndSwap(region, addr, expected, desired);
  }
  // Returns the value before the addition (wrapping, unsigned).
  absl::StatusOr<uint64_t> FetchAdd(uint64_t addr, uint64_t delta, RegionId region = kHeapRegion) {
    return DoFetchAdd(region, addr, delta);
  }

  // A zero-copy view of server memory, valid until the function returns. Only where the
  // implementation is local (IsLocal()); elsewhere FailedPrecondition: use Read.
  absl::StatusOr<std::string_view> View(uint64_t addr, uint64_t len,
                                        RegionId region = kHeapRegion) {
    return DoView(region, addr, len);
  }

  // Calls another active function by name ("dht.put"). Locally this goes through the server's
  // code registry (no network hop); remotely the function runs on the client over this context.
  absl::StatusOr<std::string> Call(std::string_view function, std::string_view args) {
    return DoCall(function, args);
  }

  // Parks the current request under `key`: the function returns, but its response waits until
  // another function calls Wake(key, result); that result becomes the response. Keys are FIFO
  // queues. To avoid a lost wake-up, park first, then re-check the condition and Wake yourself if
  // it already holds. A parked request that outlives its deadline gets DEADLINE_EXCEEDED.
  // Active mode only (FailedPrecondition elsewhere); a request parks at most once per run.
  absl::Status Park(std::string_view key, const ParkOptions& options = {}) {
    return DoPark(key, options);
  }
  // Runs the oldest live resumable request parked on `key` again now (see ParkOptions); false if
  // there was none. Active mode only.
  absl::StatusOr<bool> Resume(std::string_view key) { return DoResume(key); }
  // Registers, on the connection of the request being run, a call of `function(args)` to be made
  // on the server when that connection closes (at once, if it already has). One hook per `key`
  // per connection: registering again replaces it, an empty `function` removes it. This is how a
  // service releases what a client that went away held. Active mode only.
  absl::Status OnClose(std::string_view key, std::string_view function, std::string_view args) {
    return DoOnClose(key, function, args);
  }
  // Completes the oldest live request parked on `key` with `result`; false if there was none.
  absl::StatusOr<bool> Wake(std::string_view key, std::string_view result) {
    return DoWake(key, result);
  }

  // Waits before retrying something another party holds (a lock word, a half-created root): about
  // 2^round microseconds, at most 1 ms. Remotely, and on the server's worker threads, it sleeps.
  // A function run inline on a server I/O thread must not sleep there (it would stall that
  // thread's connections, maybe the very holder it waits for), so Backoff returns a Rescheduled
  // status instead (IsRescheduled): return it, after undoing anything that is not safe to do
  // twice; the server then runs the request again from the start on a worker thread, where
  // Backoff sleeps. Past the request's deadline it fails with DEADLINE_EXCEEDED.
  absl::Status Backoff(int round) { return DoBackoff(BackoffDelay(round)); }
  static absl::Duration BackoffDelay(int round);
  // Before the first change of a request that will block later (a server-to-server call after
  // it has written): on a server I/O thread returns the Rescheduled status Backoff would (return
  // it, having changed nothing), so the whole request runs on a worker thread; OK elsewhere.
  absl::Status MoveToWorker() { return DoBackoff(absl::ZeroDuration()); }

  // Calls `function(args)` on another member of this server's cluster (a server-to-server call)
  // with this request's deadline and the server's own credentials; the callee sees a peer's call
  // (CalledByPeer). Active code on a server started with --cluster only: FAILED_PRECONDITION
  // elsewhere (a client, an isolated worker, a server outside a cluster). The call blocks, so on an
  // I/O thread it first returns a Rescheduled status, as Backoff does: return it (undoing what is
  // not safe to do twice), and the request runs again from the start on a worker thread.
  absl::StatusOr<std::string> CallPeer(const PeerTarget& target, std::string_view function,
                                       std::string_view args) {
    return DoCallPeer(target, function, args);
  }
  // Whether the request being run is another member's server-to-server call: its connection was
  // authenticated with the `peer` permission (docs/SECURITY.md). Functions only members may call
  // refuse the rest with PERMISSION_DENIED.
  bool CalledByPeer() { return DoCalledByPeer(); }

  // Service code's check of its key's slot fence (core/slots.h), with the entry's two words as it
  // read them: OK to go on, or the redirect (slots::RedirectOf). A write to a replicated slot
  // (slots::Replicated) goes on only where it reaches the replicas: on the primary, in active mode,
  // in a service that replicates (`replicable`: its function runs the same on a replica), where
  // the check also takes the write's place in the slot's order; elsewhere FAILED_PRECONDITION.
  // On a replica applying its primary's write, every check passes (the primary's passed).
  absl::Status CheckSlot(uint32_t slot, uint64_t word, uint64_t owner_word, bool write,
                         bool replicable = false) {
    return DoCheckSlot(slot, word, owner_word, write, replicable);
  }

  // True when operations are local memory accesses (active mode).
  virtual bool IsLocal() const = 0;

  // Who holds the lock words this context takes: on the server, ardmad itself (its functions run
  // to completion or die with it); on a client, its connection, which ends when the client does.
  LockOwner lock_owner() { return DoLockOwner(); }

 protected:
  virtual absl::Status DoReadBatch(std::span<const ReadOp> ops) = 0;
  virtual absl::Status DoWriteBatch(std::span<const WriteOp> ops) = 0;
  virtual absl::StatusOr<CasResult> DoCompareAndSwap(RegionId region, uint64_t addr,
                                                     uint64_t expected, uint64_t desired) = 0;
  virtual absl::StatusOr<uint64_t> DoFetchAdd(RegionId region, uint64_t addr, uint64_t delta) = 0;
  virtual absl::StatusOr<std::string_view> DoView(RegionId region, uint64_t addr, uint64_t len) = 0;
  virtual absl::StatusOr<std::string> DoCall(std::string_view function, std::string_view args) = 0;
  virtual absl::Status DoPark(std::string_view key, const ParkOptions& options) = 0;
  virtual absl::StatusOr<bool> DoResume(std::string_view key) = 0;
  virtual absl::Status DoOnClose(std::string_view key, std::string_view function,
                                 std::string_view args) = 0;
  virtual absl::StatusOr<bool> DoWake(std::string_view key, std::string_view result) = 0;
  virtual absl::Status DoBackoff(absl::Duration delay) = 0;
  virtual LockOwner DoLockOwner() { return {}; }
  virtual absl::StatusOr<std::string> DoCallPeer(const PeerTarget&, std::string_view function,
                                                 std::string_view) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot call ", std::string(function),
                     " on a peer: only active code on a server in a cluster makes server-to-server "
                     "calls"));
  }
  virtual bool DoCalledByPeer() { return false; }
  virtual absl::Status DoCheckSlot(uint32_t slot, uint64_t word, uint64_t owner_word, bool write,
                                   bool replicable);
};

// The status Backoff returns when the request must move to a worker thread.
absl::Status RescheduledError();
bool IsRescheduled(const absl::Status& status);

}  // namespace ardma

#endif  // ARDMA_CORE_CONTEXT_CONTEXT_H_
