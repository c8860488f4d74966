// DedupWindow: remembers recent EXECUTEs by (client id, request id) so a retried request is
// answered with the first attempt's result instead of running twice.
//
// A client retries an EXECUTE (same client id and request id) after its connection broke. The
// window then either replays the stored result, or, if the first attempt is still running (or
// parked), attaches the retry as a second waiter. Each client has its own window of its most recent
// finished requests (at least the in-flight limit of a connection, so every request a client can
// still be waiting for is covered); a client's highest evicted request id is kept, and a retry at
// or below it is refused (FAILED_PRECONDITION) rather than run again. Results are bounded in bytes
// over all clients, and the number of clients remembered is bounded: beyond it the least recently
// seen client's window is dropped (a retry from that client of a request older than its last
// `max_clients` other clients' activity would then run again). Client id 0 opts out.
//
// Clients are spread by id over `shards` independently locked parts, so requests of different
// clients on different threads do not queue for one lock; `max_clients` is split evenly between
// the shards (each holds its share, at least one client), while the bytes of results are bounded
// over all of them, as before.
// Thread-safe.
#ifndef ARDMA_CORE_SERVER_DEDUP_WINDOW_H_
#define ARDMA_CORE_SERVER_DEDUP_WINDOW_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/active/parking_lot.h"

namespace ardma {

struct DedupLimits {
  size_t max_entries_per_client = 1024;
  size_t max_clients = 4096;
  size_t max_result_bytes = 64u << 20;
  size_t shards = 16;
};

class DedupWindow {
 public:
  enum class Admission {
    kRun,       // first time: run it, then call Finish
    kAnswered,  // already finished: `responder` was answered with the stored result
    kAttached,  // still running: `responder` will be answered by Finish
    kTooOld,    // evicted: `responder` was answered FAILED_PRECONDITION
  };

  explicit DedupWindow(DedupLimits limits);
  DedupWindow(const DedupWindow&) = delete;
  DedupWindow& operator=(const DedupWindow&) = delete;

  // `responder` makes the responder a retry is answered through; it is called only for a retry
  // (never for the first attempt, kRun, which most requests are).
  Admission Admit(uint64_t client_id, uint64_t request_id,
                  absl::FunctionRef<std::shared_ptr<Responder>()> responder);
  // Stores the result of a request admitted with kRun and answers every waiter attached to it
  // (the original's own responder is the caller's business).
  void Finish(uint64_t client_id, uint64_t request_id, const absl::StatusOr<std::string>& result);

  uint64_t replays() const;
  size_t size() const;  // requests remembered, over all clients

 private:
  struct Record {
    bool done = false;
    absl::StatusOr<std::string> result;  // (set when done; the default allocates nothing)
    std::vector<std::shared_ptr<Responder>> waiters;
  };
  struct ClientWindow {
    absl::flat_hash_map<uint64_t, Record> records;
    std::deque<uint64_t> finished;  // eviction order
    uint64_t evicted_up_to = 0;
    uint64_t last_seen = 0;
    size_t running = 0;
  };
  // A lock for a critical section of a few hash probes: taken with one exchange, released with
  // a store (an absl::Mutex costs two read-modify-writes), yielding the CPU while another holds
  // it for long (a holder preempted on a host with more busy threads than cores).
  class ABSL_LOCKABLE ShardLock {
   public:
    void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
      while (held_.exchange(true, std::memory_order_acquire)) {
        for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
          if (spins >= 64) std::this_thread::yield();
        }
      }
    }
    void Unlock() ABSL_UNLOCK_FUNCTION() { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };
  class ABSL_SCOPED_LOCKABLE Locked {
   public:
    explicit Locked(ShardLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) {
      lock_->Lock();
    }
    ~Locked() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    ShardLock* const lock_;
  };
  struct alignas(64) Shard {
    mutable ShardLock mu;
    absl::flat_hash_map<uint64_t, ClientWindow> clients ABSL_GUARDED_BY(mu);
    uint64_t clock ABSL_GUARDED_BY(mu) = 0;  // counts admissions; orders clients by last use
    size_t entries ABSL_GUARDED_BY(mu) = 0;
    uint64_t replays ABSL_GUARDED_BY(mu) = 0;
  };
  Shard& ShardOf(uint64_t client_id) const;
  void AddResultBytes(size_t n);
  void SubtractResultBytes(size_t n);
  void EvictOldestLocked(Shard& shard, ClientWindow& window)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  void ForgetIdlestClientLocked(Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);

  const DedupLimits limits_;
  const size_t num_shards_;
  const size_t max_clients_;             // per shard
  std::atomic<size_t> result_bytes_{0};  // over every shard (the bound is the window's)
  const std::unique_ptr<Shard[]> shards_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_DEDUP_WINDOW_H_
