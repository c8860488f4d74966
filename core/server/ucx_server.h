// UcxServer: ardmad's UCX transport (docs/transports.md). It owns a UCP context and worker, puts
// the regions where the transports can reach them, and serves the sessions clients open with
// UCX_CONNECT over their ordinary TCP or Unix-socket connection:
//
//   - One-sided READ/WRITE/CAS/FETCH_ADD never reach it: clients perform them with ucp_get/put/
//     atomic on the remote keys it handed out (no server thread is involved where the transport is
//     truly one-sided: shared memory, CMA, verbs).
//   - Every other request arrives as an active message carrying a frame exactly as on TCP, and
//     goes to the one RequestHandler; the response goes back as an active message.
//   - A session lives as long as the connection it was opened on: once that closes, the session's
//     close hooks run (RequestHandler::ConnectionClosed) and its endpoint is closed. A session
//     that sends a malformed message is closed with its connection.
//   - The client's worker address is unpacked in another process first (UcxAddressCheck): UCX
//     asserts on some malformed ones, which would end the server.
//
// Each of its progress threads (one per --io-threads) drives a worker of its own: it polls while
// there is traffic and sleeps on the worker's event fd when idle. A new session goes to the next
// worker in turn that is not stuck in a long function (as a TCP connection goes to an I/O thread),
// and its requests, inline EXECUTEs among them, run on that worker's thread. Start/Stop from one
// thread; Connect from any.
#ifndef ARDMA_CORE_SERVER_UCX_SERVER_H_
#define ARDMA_CORE_SERVER_UCX_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/memory/region.h"
#include "core/server/region_registrar.h"
#include "core/server/request_handler.h"
#include "core/server/ucx_address_check.h"
#include "core/ucx/ucx_context.h"
#include "core/wire/messages.h"

namespace ardma {

class UcxServer : public RegionKeys {
 public:
  // `progress_threads` workers, each with its thread (at least 1).
  static absl::StatusOr<std::unique_ptr<UcxServer>> Create(int progress_threads = 1);
  ~UcxServer();  // Stop()
  UcxServer(const UcxServer&) = delete;
  UcxServer& operator=(const UcxServer&) = delete;

  // A region in memory UCX allocated (shared memory on one host: peers map it, and their atomics
  // on it are one-sided and coherent with the server's CPU atomics).
  absl::StatusOr<std::unique_ptr<Region>> AllocateRegion(uint64_t size);

  // Makes every region reachable (registering those AllocateRegion did not make) and starts
  // serving with `handler`. `regions` and `handler` must outlive Stop().
  absl::Status Start(const RegionTable& regions, RequestHandler* handler);
  // Answers UCX_CONNECT, received on connection `tcp`: the session's number, the worker's address
  // and the regions' keys.
  absl::StatusOr<std::string> Connect(std::string_view payload,
                                      const std::shared_ptr<ResponseSink>& tcp);
  // Stops the progress thread and closes every session (running its close hooks).
  void Stop();

  // Sessions open now.
  size_t sessions() const;
  // Has every progress thread look for sessions whose connection has closed now.
  void SweepNow();
  // A stream connection closed: a session it started is closed by its thread now.
  void ConnectionClosed(const ResponseSink* connection);
  // Each progress thread's sessions, and whether it is stuck in one function (over the handler's
  // inline_overrun), so that it gets no new session.
  struct ThreadLoad {
    size_t sessions = 0;
    bool stuck = false;
  };
  std::vector<ThreadLoad> threads() const;

  // RegionKeys: regions registered at run time (region_registrar.h).
  absl::StatusOr<std::string> Add(wire::RegionId id, const Region& region) override;
  void Remove(wire::RegionId id) override;
  std::string Rkey(wire::RegionId id) const override;

 private:
  class Session;
  struct RegionEntry {
    wire::UcxRegionKey key;
    ucp_mem_h memh = nullptr;
    bool registered_here = false;  // unmapped by Stop (allocated ones go with their Region)
  };
  // A worker and the thread that progresses it; its sessions' requests run there.
  struct Lane {
    UcxServer* server = nullptr;
    size_t index = 0;
    std::shared_ptr<UcxContext> ucx;  // lane 0's is the server's own
    std::thread thread;
    std::thread::id thread_id;  // set before any session exists: no Send can race with this
    int wake_fd = -1;           // an eventfd the thread sleeps on with the worker's
    // Since when its thread has been running one function (RequestHandler::SetIoBusyStamp).
    std::atomic<int64_t> busy{0};
    std::atomic<bool> sweep_now{false};  // SweepNow
    absl::Mutex send_mu;
    // Responses produced on other threads, for this thread to send.
    std::vector<std::pair<std::shared_ptr<Session>, std::string>> send_queue
        ABSL_GUARDED_BY(send_mu);
    std::atomic<bool> queued{false};  // send_queue may be non-empty: the spin reads only this
    // Its sessions that hold requests until they have room (this thread's only).
    std::vector<std::shared_ptr<Session>> holding;
    // Its sessions by id, as its thread has looked them up (this thread's only): a request finds
    // its session without the server's lock. Dropped as the sweep closes them.
    absl::flat_hash_map<uint64_t, std::shared_ptr<Session>> known;

    void Enqueue(std::shared_ptr<Session> session, std::string frame);
    void Wake();
    // Sends what was queued; true if there was anything.
    bool SendQueued();
  };

  explicit UcxServer(std::shared_ptr<UcxContext> ucx) : ucx_(std::move(ucx)) {}
  static ucs_status_t OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  // UCX found a session's client dead (peer error handling): the session is closed.
  static void OnPeerFailure(void* arg, ucp_ep_h ep, ucs_status_t status);
  // A request arrived: handled now, or held while the session is full.
  void Arrived(Session* session, std::string_view frame);
  // Handles what `lane`'s sessions held, as far as they have room; true if anything was.
  bool HandleHeld(Lane& lane);
  void HandleFrame(Session* session, std::string_view frame);
  std::shared_ptr<Session> FindSession(uint64_t id);
  // The lane for a new session: the next in turn whose thread is not stuck.
  Lane& PickLane();
  void ProgressLoop(Lane& lane);
  // Closes the sessions on `lane` whose connection has closed (every session with `all`, lane
  // ignored; only once the threads have stopped), and touches those with requests unanswered.
  // Closes `lane`'s sessions that are no longer open (all sessions with `all`); true if one of
  // those left has requests unanswered.
  bool CloseSessions(const Lane* lane, bool all);

  const std::shared_ptr<UcxContext> ucx_;
  std::unique_ptr<UcxAddressCheck> address_check_;
  RequestHandler* handler_ = nullptr;
  std::vector<RegionEntry> regions_;
  absl::flat_hash_map<char*, ucp_mem_h> allocated_;  // base -> memh, from AllocateRegion
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<size_t> next_lane_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex dynamic_mu_;
  absl::flat_hash_map<wire::RegionId, RegionEntry> dynamic_ ABSL_GUARDED_BY(dynamic_mu_);
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_UCX_SERVER_H_
