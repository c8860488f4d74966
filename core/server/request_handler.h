// RequestHandler: everything the server does with a request frame, without any I/O.
//
// One-sided ops (READ, WRITE, CAS, FETCH_ADD), PING, HAS_CODE and STATS are answered before Handle
// returns, on the calling (I/O) thread. EXECUTE runs inline when its function is known to be short
// (its running average and its last run are under `inline_threshold`, and it did not overrun
// `inline_overrun` there three times in a row), otherwise on the worker pool; LOAD of new code runs on the pool. An
// inline function that must wait (Context::Backoff) is run again from the start on the pool, so no
// I/O thread ever sleeps. A parked EXECUTE is answered when woken. Retried EXECUTEs are
// de-duplicated. Connections appear here only as ResponseSinks, so tests and other transports can
// drive it.
//
// Thread-safe: Handle may be called from any number of I/O threads at once.
#ifndef ARDMA_CORE_SERVER_REQUEST_HANDLER_H_
#define ARDMA_CORE_SERVER_REQUEST_HANDLER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/active/code_registry.h"
#include "core/active/parking_lot.h"
#include "core/memory/region.h"
#include "core/security/auth.h"
#include "core/server/dedup_window.h"
#include "core/server/isolation.h"
#include "core/server/owner_table.h"
#include "core/server/region_registrar.h"
#include "core/server/server_counters.h"
#include "core/server/slot_replication.h"
#include "core/server/syncer.h"
#include "core/server/worker_pool.h"
#include "core/wire/frame.h"
#include "core/wire/messages.h"

namespace ardma {

// Who a connection is and what it may do (core/security/auth.h). Written by the handler while it
// handles the connection's AUTH (or its greeting); `authenticated` is set last, with release order,
// so a thread that sees it true sees the rest.
struct ConnectionAuth {
  wire::Nonce nonce{};  // the HELLO challenge
  std::string name;     // the secret's name; empty on a server without an auth file
  pid_t peer_pid = 0;   // the client process, on a Unix socket (SO_PEERCRED); 0: unknown
  security::Grant grant;
  std::atomic<bool> authenticated{false};
  uint64_t owner_token = 0;  // the connection's lock owner (OwnerTable), given in its HELLO

  // The grant, once authenticated; nothing before.
  const security::Grant* Granted() const {
    return authenticated.load(std::memory_order_acquire) ? &grant : nullptr;
  }
};

// A connection, as the handler sees it.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // Queues one complete response frame. Callable from any thread.
  virtual void Send(std::string frame) = 0;
  // Sends `frame`, then closes the connection and reads nothing more from it (refused
  // authentication). Callable from any thread.
  virtual void SendAndClose(std::string frame) { Send(std::move(frame)); }
  // False once the connection is closed.
  virtual bool Open() const = 0;
  // Closes the connection from any thread (what was queued may be lost).
  virtual void Shutdown() {}
  // Traffic for this connection that arrived by another way (its UCX session's active messages):
  // the connection is not idle (--idle-timeout). Callable from any thread.
  virtual void Touch() {}

  ConnectionAuth& auth() { return auth_; }
  const ConnectionAuth& auth() const { return auth_; }

 private:
  ConnectionAuth auth_;
};

struct HandlerOptions {
  wire::WireLimits limits;
  absl::Duration default_deadline = absl::Seconds(30);  // EXECUTE without a timeout
  absl::Duration inline_threshold = absl::Microseconds(50);
  // A run on an I/O thread that lasts longer than this sends its function's next call to the pool;
  // `overruns_to_pool` such runs in a row (no short run on an I/O thread between them) send it
  // there for good. While a run on an I/O thread lasts longer, new calls go to the pool too.
  absl::Duration inline_overrun = absl::Milliseconds(10);
  int overruns_to_pool = 3;
  // Modelled cost of each memory access by active code (busy-wait); see Execution::access_cost.
  absl::Duration access_cost;
  int workers = 2;  // 0: every EXECUTE and LOAD runs inline
  // With `replication` (and workers): the threads that replicated writes wait for their
  // replicas on; 0: as many as `workers`. (More than the cores only adds hand-offs: 16 on this
  // 2-core machine took 6,000 replicated PUTs/s against 10,500 with 2 — docs/BENCHMARKS.md.)
  int replicating_workers = 0;
  // The secrets connections authenticate with (--auth-file); null: no authentication, and every
  // connection may do everything.
  std::shared_ptr<const security::AuthTable> auth;
  size_t worker_queue = 4096;
  DedupLimits dedup;
  // When writes to file-backed memory reach the device (--sync; syncer.h).
  SyncPolicy sync = SyncPolicy::kInterval;
  absl::Duration sync_interval = absl::Seconds(1);
  // Regions clients register at run time (REGISTER; --register-dir and the limits).
  RegistrationLimits registration;
  // How active code calls the cluster's other members (Context::CallPeer), set by whoever starts
  // the server in a cluster (ardmad --cluster) and outliving it; null: not in a cluster.
  PeerCaller* peers = nullptr;
  // This member's replicated slots, as primary and as replica (set with `peers`, outliving the
  // server); null: none.
  SlotReplication* replication = nullptr;
  // The services the server comes with (ServerOptions::built_in_services, copied by the server):
  // a peer's call by name of one of their functions that no loaded library exports loads the
  // service from the server's own copy first — a replica applies its primary's writes with it.
  std::vector<const ActiveLibrary*> built_in_services;
};

class RequestHandler {
 public:
  // Borrows `regions` (region 0 is the heap) and `registry` for the handler's lifetime.
  RequestHandler(const HandlerOptions& options, RegionTable* regions, CodeRegistry* registry);
  ~RequestHandler();  // Stop()
  RequestHandler(const RequestHandler&) = delete;
  RequestHandler& operator=(const RequestHandler&) = delete;

  // Where the calling I/O thread stamps the steady-clock ns at which it began running a function
  // inline (0 when it is not), so the server can give new connections to threads that are not
  // stuck in one. Each I/O thread calls this once, before serving.
  static void SetIoBusyStamp(std::atomic<int64_t>* stamp);
  // Whether the thread owning `stamp` has been running one function for over `inline_overrun`.
  bool IoThreadStuck(const std::atomic<int64_t>& stamp) const;

  // Answers UCX_CONNECT (the server's UCX transport, ucx_server.h). Without one, UCX_CONNECT is
  // FAILED_PRECONDITION. Set before serving.
  using UcxConnectHook = std::function<absl::StatusOr<std::string>(
      std::string_view payload, const std::shared_ptr<ResponseSink>& sink)>;
  void SetUcxConnect(UcxConnectHook hook) { ucx_connect_ = std::move(hook); }
  // Makes regions registered at run time reachable one-sidedly (the UCX server). Set before
  // serving.
  void SetRegionKeys(RegionKeys* keys) { registrar_.SetKeys(keys); }
  // Tracks lock owners (owner_table.h): every stream connection gets one in its HELLO, ended when
  // it closes, and functions hold locks as the server's. Without it owners are anonymous. Set
  // before serving.
  void SetOwners(OwnerTable* owners) { owners_ = owners; }
  // Runs loaded functions in worker processes (ardmad --isolate, isolation.h): all of them, or
  // those of connections without the admin permission. Set before serving.
  void SetIsolation(std::unique_ptr<IsolatedPool> pool, bool all) {
    isolated_ = std::move(pool);
    isolate_all_ = all;
  }

  // The HELLO frame that opens a new stream connection: its challenge, and whether it must
  // authenticate. Without an auth file the connection is granted everything here.
  std::string Greeting(ResponseSink& sink);
  // A connection whose client certificate (mutual TLS) names `name`: authenticated as that
  // auth-file name if the file has it; without an auth file, with every permission. Call before
  // Greeting.
  void AuthenticateCertificate(ResponseSink& sink, std::string_view name);
  // Grants a connection what `from` was granted (a UCX session opened over it).
  static void InheritAuth(const ResponseSink& from, ResponseSink& to);

  // Handles one request. `payload` need only live until Handle returns.
  void Handle(const wire::FrameHeader& header, std::string_view payload,
              const std::shared_ptr<ResponseSink>& sink);

  // Answers parked requests whose deadline passed and resumes those whose time came. Call at
  // NextParkedEvent (the server's timer; `listener` hears of each new event time, from any
  // thread), never on a tick: an idle server wakes for nothing.
  void ExpireParked();
  absl::Time NextParkedEvent() const;
  void SetParkedListener(std::function<void(absl::Time)> listener);
  // Runs the close hooks (Context::OnClose) registered on `sink`. Call once, when it closes.
  void ConnectionClosed(const ResponseSink* sink);
  // Told of every closing connection first (the UCX server closes the sessions it started). Set
  // before connections arrive.
  void SetConnectionClosedListener(std::function<void(const ResponseSink*)> listener) {
    connection_closed_ = std::move(listener);
  }
  // Cancels running functions (their next memory access fails), drains the worker pool.
  void Stop();

  ServerCounters& counters() { return counters_; }
  const wire::WireLimits& limits() const { return options_.limits; }
  // Counters plus gauges: parked now, libraries, worker queue depth, heap bytes allocated, ...
  std::vector<wire::StatsEntry> Stats() const;
  // What a connection without `admin` gets from STATS: the heap's size, open connections and
  // loaded libraries (no walk of the heap, no counters).
  std::vector<wire::StatsEntry> StatsSummary() const;
  // Everything Stats() has, plus the latency histograms, in Prometheus text format (ardmad
  // --metrics): ardma_requests_total{op}, ardma_request_duration_seconds{op}, ardma_* counters
  // (_total) and gauges.
  std::string MetricsText() const;

 private:
  class ExecuteResponder;
  class Host;

  // One request, as an op's handler sees it. The ops come in families, one file each:
  // ops_data.cc (PING, READ, WRITE, CAS, FETCH_ADD), ops_code.cc (HAS_CODE, LOAD, EXECUTE),
  // ops_admin.cc (STATS, REGISTER, DEREGISTER, REGION_INFO), ops_session.cc (HELLO, AUTH,
  // UCX_CONNECT, and the permission check).
  struct Request {
    const wire::FrameHeader& header;
    std::string_view payload;
    const std::shared_ptr<ResponseSink>& sink;
    const security::Grant& grant;
    uint64_t start_ns;              // steady clock, for the latency
    mutable bool answered = false;  // set by a handler that answered by itself after all
  };
  // A handler answers with the payload it appends to *out (OK) or with an error; or, for an op
  // whose row says `answers_itself`, it answers by itself, now or later, and records the latency.
  using OpFn = absl::Status (RequestHandler::*)(const Request& request, std::string* out);
  struct OpRow {
    OpFn run = nullptr;        // null: not a request a client sends
    uint32_t permissions = 0;  // any one of these is needed (0: none)
    bool answers_itself = false;
  };
  // The table from op to handler: a new op is one handler and one row here.
  static const OpRow& Row(wire::Op op);

  // ops_session.cc
  // PERMISSION_DENIED unless `grant` has one of `row`'s permissions (READ/WRITE are checked per
  // region as well, by MayAccess).
  static absl::Status Allowed(wire::Op op, const OpRow& row, const security::Grant& grant);
  // AUTH: checks the proof; on success grants the secret's permissions, otherwise answers
  // UNAUTHENTICATED and closes the connection. Runs before the connection has a grant.
  void HandleAuth(const wire::FrameHeader& header, std::string_view payload,
                  const std::shared_ptr<ResponseSink>& sink);
  absl::Status RefuseHello(const Request& request, std::string* out);
  absl::Status UcxConnect(const Request& request, std::string* out);

  // ops_data.cc
  // PERMISSION_DENIED unless `grant` may read (write) `region`.
  static absl::Status MayAccess(const security::Grant& grant, RegionId region, bool write);
  absl::Status Ping(const Request& request, std::string* out);
  absl::Status Read(const Request& request, std::string* out);
  absl::Status Write(const Request& request, std::string* out);
  absl::Status WriteEntries(std::string_view payload, const security::Grant& grant);
  absl::Status Cas(const Request& request, std::string* out);
  absl::Status FetchAdd(const Request& request, std::string* out);

  // ops_admin.cc
  absl::Status StatsOp(const Request& request, std::string* out);
  // REGISTER, DEREGISTER and REGION_INFO (region_registrar.h).
  absl::Status Regions(const Request& request, std::string* out);

  // ops_code.cc
  absl::Status HasCode(const Request& request, std::string* out);
  absl::Status Load(const Request& request, std::string* out);
  absl::Status Execute(const Request& request, std::string* out);
  // One run of a loaded function: an EXECUTE (or its resumption), or a close hook (no sink).
  struct Call {
    const BoundFunction& fn;
    std::string_view args;
    absl::Time deadline;
    const std::shared_ptr<Responder>& responder;
    const std::shared_ptr<ResponseSink>& sink;  // null for a close hook
    bool isolated;                              // runs in an isolated worker process
    // Its code may write memory (its caller may, one-sidedly): an isolated worker maps the heap
    // read-only otherwise. A close hook's is its registering connection's.
    bool writable;
    bool from_peer = false;  // another member's server-to-server call (wire::kFlagPeer)
    // Set on a replica: the call applies its primary's write, the `seq`th of its slot.
    std::optional<ReplicaOrder> apply;
    bool stale_read = false;  // a replica may answer it (wire::kFlagStaleRead)
    // The steady clock (ns) at the request's arrival, for a call run as it arrives; 0 otherwise.
    uint64_t arrived_ns = 0;
  };
  // Whether code called on `sink`'s connection may write memory, and whether it runs isolated
  // (decided once per call).
  bool MayWrite(const ResponseSink* sink) const;
  bool Isolated(const BoundFunction& fn, const ResponseSink* sink) const;
  // Loads the built-in service that exports `function` (with what it depends on); false if none
  // does or it would not load.
  bool LoadBuiltInFor(std::string_view function);
  // Where a call runs — here on the I/O thread (`may_inline` and the function is known to be
  // short) or on a worker pool — decided here and nowhere else. `replicating`: a write of a
  // replicated slot, which waits for its replicas on a pool of its own.
  void Start(const Call& call, bool may_inline, bool replicating = false);
  bool MayRunInline(const BoundFunction& fn) const;
  // Runs it on this thread; `on_worker`: this thread may sleep (Context::Backoff). A function
  // that backs off on an I/O thread is started again on the pool.
  void Run(const Call& call, bool on_worker);
  // The Execution of a run of `call` on this thread.
  void Prepare(Execution& ex, const Call& call, RequestHost* host, bool on_worker);
  // Waits for an isolated call that outlasted its inline run on a pool thread, then completes it
  // (`so_far`: what the run on the I/O thread recorded; `start`: when it began).
  void HandOff(const Call& call, std::unique_ptr<IsolatedPool::InFlight> in_flight,
               const Execution& so_far, int64_t start);
  // What follows a run: its statistics, then the answer (or parking it, or running it again).
  // `ns`: the run's time; `end_ns`: the steady clock when it ended.
  void Complete(const Call& call, Execution& ex, absl::StatusOr<std::string> result, uint64_t ns,
                uint64_t end_ns);

  void Reply(const std::shared_ptr<ResponseSink>& sink, std::string frame);
  void ReplyError(const std::shared_ptr<ResponseSink>& sink, const wire::FrameHeader& header,
                  const absl::Status& status);
  // The answer to an EXECUTE: its result bytes or its error; dropped if the connection is gone.
  void ReplyResult(const std::shared_ptr<ResponseSink>& sink, const wire::FrameHeader& header,
                   const absl::StatusOr<std::string>& result);
  // Admits a request that is de-duplicated by (client id, request id) (a WRITE or EXECUTE with
  // a client id): true if it runs now; false if it is a retry, answered from the window.
  bool AdmitOnce(const wire::FrameHeader& header, const std::shared_ptr<ResponseSink>& sink);
  absl::Status SetCloseHook(const std::shared_ptr<ResponseSink>& sink, std::string_view key,
                            std::string_view function, std::string_view args);
  // Runs function(args) on the pool for a closed connection, with that connection's right to
  // write (`writable`); its result is only logged.
  void RunCloseHook(const std::string& function, const std::string& args, bool writable);

  const HandlerOptions options_;
  RegionTable* const regions_;
  CodeRegistry* const registry_;
  ServerCounters counters_;
  UcxConnectHook ucx_connect_;
  OwnerTable* owners_ = nullptr;
  std::unique_ptr<IsolatedPool> isolated_;
  bool isolate_all_ = false;
  ParkingLot parking_;
  std::function<void(const ResponseSink*)> connection_closed_;
  DedupWindow dedup_;
  RegionRegistrar registrar_;
  Syncer syncer_;
  // Read by running functions on every kDeadlineCheckInterval-th memory access.
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<WorkerPool> workers_;  // null when options_.workers == 0
  // Replicas' applies that cannot run on an I/O thread. Never the pool's: its workers may all be
  // waiting for a replica, which may be a member whose workers wait for this one's apply (every
  // member is a primary and a replica: a ring waiting on itself). Null without replication.
  std::unique_ptr<WorkerPool> apply_workers_;
  // Replicated writes, each waiting for its replicas (a wait, not work): many at once, without
  // taking the workers other calls need. Null without replication.
  std::unique_ptr<WorkerPool> replicating_workers_;
  struct CloseHook {
    std::string function;
    std::string args;
    bool writable;  // MayWrite of the connection that set it
  };
  absl::Mutex hooks_mu_;
  absl::flat_hash_map<const ResponseSink*, absl::flat_hash_map<std::string, CloseHook>> close_hooks_
      ABSL_GUARDED_BY(hooks_mu_);
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_REQUEST_HANDLER_H_
