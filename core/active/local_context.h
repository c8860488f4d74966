// LocalContext: Context on the server, where every operation is a direct access to a Region and
// Call goes through the CodeRegistry without a network hop.
//
// One Execution describes one EXECUTE request: where memory and code live, its deadline, how to
// answer it later if it parks, and the counters its memory operations add to. Every LocalContext
// of the request (the top-level function and everything it Calls) shares it. Memory operations
// check the deadline and the cancel flag every kDeadlineCheckInterval operations and then fail with
// DEADLINE_EXCEEDED / CANCELLED: that is how a runaway function that touches memory is stopped.
//
// A LocalContext and its Execution are used by the one thread that runs the request.
#ifndef ARDMA_CORE_ACTIVE_LOCAL_CONTEXT_H_
#define ARDMA_CORE_ACTIVE_LOCAL_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/time/time.h"
#include "core/active/code_registry.h"
#include "core/active/parking_lot.h"
#include "core/active/replication.h"
#include "core/context/context.h"
#include "core/memory/region.h"

namespace ardma {

// What active code did to memory; summed into the server's counters after each request.
struct ActiveOpCounts {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t cas = 0;
  uint64_t fetch_adds = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t calls = 0;
  uint64_t peer_calls = 0;  // server-to-server calls made (Context::CallPeer)
};

// The server's side of one running request: how to run it again and where its connection is.
class RequestHost {
 public:
  virtual ~RequestHost() = default;
  // What runs this request's top-level function again with `args` (a resumable Park).
  virtual ParkingLot::ResumeFn MakeResume(std::string args) = 0;
  // Context::OnClose on the request's connection.
  virtual absl::Status OnClose(std::string_view key, std::string_view function,
                               std::string_view args) = 0;
};

// What a function that runs outside the server process (an isolated worker, ardmad --isolate)
// asks of the server: everything a Context does beyond memory and the worker's own code.
class ServerLink {
 public:
  virtual ~ServerLink() = default;
  virtual absl::Status Park(std::string_view key, const ParkOptions& options) = 0;
  virtual absl::StatusOr<bool> Resume(std::string_view key) = 0;
  virtual absl::StatusOr<bool> Wake(std::string_view key, std::string_view result) = 0;
  virtual absl::Status OnClose(std::string_view key, std::string_view function,
                               std::string_view args) = 0;
  // A function outside the calling code's library and dependencies. The server runs what only it
  // has (code linked into ardmad, Java code) and returns its result; shipped native code it loads
  // into this process instead and sets *run_here to its library's hash: the caller runs it here.
  virtual absl::StatusOr<std::string> Call(std::string_view function, std::string_view args,
                                           std::optional<CodeHash>* run_here) = 0;
};

struct Execution {
  RegionTable* regions = nullptr;
  const CodeRegistry* registry = nullptr;
  ParkingLot* parking = nullptr;         // null: Park fails
  // How a parked request is answered later: the caller's, which outlives the run (Park takes a
  // reference of its own).
  const std::shared_ptr<Responder>* responder = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancelled = nullptr;  // set by the server on shutdown
  LockOwner owner;  // who the request's lock words are held by (the server, when it tracks owners)
  // What the server offers beyond memory and code; null: resumable Park and OnClose fail.
  RequestHost* host = nullptr;
  // Set by Park; the server calls parking->FunctionReturned(parked, status) afterwards.
  std::shared_ptr<ParkingLot::Entry> parked;
  // Set in an isolated worker: parking, waking, close hooks and calls of code the worker does not
  // have go to the server through it (and parking/host stay null).
  ServerLink* link = nullptr;
  bool parked_by_link = false;
  // False while the request runs inline on an I/O thread: Backoff then asks to be rescheduled
  // (sets rescheduled) instead of sleeping.
  bool may_block = true;
  bool rescheduled = false;
  // A modelled cost per memory access by active code (the Active RDMA paper's "DMA cost" axis): each access
  // busy-waits this long. Zero: none.
  absl::Duration access_cost;
  ActiveOpCounts counts;
  // The server's calls to its cluster's other members; null outside a cluster (CallPeer fails).
  PeerCaller* peers = nullptr;
  bool from_peer = false;  // the request is a peer's server-to-server call (CalledByPeer)
  // Where this member's slots are replicated (null: nowhere, or outside the server).
  Replication* replication = nullptr;
  // Set by the run's first check of a write to a replicated slot: the server forwards the call
  // to the replicas (in this order) before it answers.
  std::optional<Replication::Ticket> ticket;
  bool replicates = false;  // it checked a write of a replicated slot (rescheduled or not)
  // The call is the primary's write, applied here as its replica: every slot check passes.
  bool replica_apply = false;
  // The caller accepts a replica's answer to a read (--read-from-replica).
  bool stale_read = false;
  int depth = 0;  // nesting of Call
  // Registered regions the function holds views of (Context::View): mapped until it returns.
  std::vector<std::shared_ptr<Region>> pinned;
};

class LocalContext : public Context {
 public:
  static constexpr int kMaxCallDepth = 32;
  static constexpr uint64_t kDeadlineCheckInterval = 64;

  // Borrows `execution` for the context's lifetime.
  explicit LocalContext(Execution* execution) : ex_(execution) {}

  bool IsLocal() const override { return true; }
  // The request this context belongs to (its deadline, for code that runs outside C++'s reach,
  // like the JVM's).
  const Execution& execution() const { return *ex_; }

  // Runs `fn` over a fresh LocalContext of `execution`.
  static absl::StatusOr<std::string> Run(Execution* execution, const BoundFunction& fn,
                                         std::string_view args);

 protected:
  absl::Status DoReadBatch(std::span<const ReadOp> ops) override;
  absl::Status DoWriteBatch(std::span<const WriteOp> ops) override;
  absl::StatusOr<CasResult> DoCompareAndSwap(RegionId region, uint64_t addr, uint64_t expected,
                                             uint64_t desired) override;
  absl::StatusOr<uint64_t> DoFetchAdd(RegionId region, uint64_t addr, uint64_t delta) override;
  absl::StatusOr<std::string_view> DoView(RegionId region, uint64_t addr, uint64_t len) override;
  absl::StatusOr<std::string> DoCall(std::string_view function, std::string_view args) override;
  absl::Status DoPark(std::string_view key, const ParkOptions& options) override;
  absl::StatusOr<bool> DoResume(std::string_view key) override;
  absl::Status DoOnClose(std::string_view key, std::string_view function,
                         std::string_view args) override;
  absl::StatusOr<bool> DoWake(std::string_view key, std::string_view result) override;
  absl::Status DoBackoff(absl::Duration delay) override;
  LockOwner DoLockOwner() override { return ex_->owner; }
  absl::StatusOr<std::string> DoCallPeer(const PeerTarget& target, std::string_view function,
                                         std::string_view args) override;
  bool DoCalledByPeer() override { return ex_->from_peer; }
  absl::Status DoCheckSlot(uint32_t slot, uint64_t word, uint64_t owner_word, bool write,
                           bool replicable) override;

 private:
  // Counts one operation of `accesses` memory accesses (paying the modelled access cost); every
  // kDeadlineCheckInterval operations checks deadline and cancellation.
  absl::Status Tick(size_t accesses = 1) {
    if (ex_->access_cost <= absl::ZeroDuration() && ++ops_ % kDeadlineCheckInterval != 0) {
      return absl::OkStatus();
    }
    return SlowTick(accesses);
  }
  absl::Status SlowTick(size_t accesses);

  Execution* const ex_;
  uint64_t ops_ = 0;
  const BoundFunction* caller_ = nullptr;  // the function running in this context, if any
};

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_LOCAL_CONTEXT_H_
