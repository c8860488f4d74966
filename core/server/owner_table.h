// The owner table: which lock holders are alive (LockOwner in core/context/context.h, the layout
// in core/context/lock_owner.h). ardmad opens it once at start, takes a slot for itself, gives one
// to every stream connection in its HELLO and ends it when the connection closes, so a service
// waiting on a lock word can tell a holder that died from one that is only slow: the lease is the
// connection, not a timer.
//
//   ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<OwnerTable> owners, OwnerTable::Open(ctx, heap, n));
//   LockOwner mine = owners->Join();   // a new connection
//   owners->Leave(mine.token);         // it closed
#ifndef ARDMA_CORE_SERVER_OWNER_TABLE_H_
#define ARDMA_CORE_SERVER_OWNER_TABLE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/context/context.h"
#include "core/memory/region.h"

namespace ardma {

class OwnerTable {
 public:
  // Finds the table of the heap `ctx` works on (root "ardma.owners") or creates one of `slots`
  // slots, ends every owner an earlier run left live (they died with it) and takes a slot for the
  // server. `heap` is that heap (region 0): slot words are bumped in it directly. A table that
  // does not check out (a client may have written over it) is replaced by a new one, with a
  // warning.
  static absl::StatusOr<std::unique_ptr<OwnerTable>> Open(Context& ctx, Region& heap,
                                                          uint64_t slots);
  // How many slots a heap of `heap_bytes` gets: one per KiB, from 1,024 to 65,536.
  static uint64_t SlotsFor(uint64_t heap_bytes);

  // The server's own owner (what its functions hold).
  LockOwner server() const { return {server_token_, table_}; }
  // An owner for a new connection; anonymous (token 0) when every slot is taken.
  LockOwner Join();
  // Ends the owner of `token` (its connection closed). Anonymous tokens are ignored.
  void Leave(uint64_t token);
  uint64_t live() const { return live_.load(std::memory_order_relaxed); }
  uint64_t slots() const { return slots_; }

 private:
  OwnerTable(Region& heap, uint64_t table, uint64_t slots, uint64_t next);
  std::atomic_ref<uint64_t> Word(uint64_t slot);

  Region& heap_;
  const uint64_t table_;
  const uint64_t slots_;
  uint64_t server_token_ = 0;
  std::atomic<uint64_t> live_{0};
  absl::Mutex mu_;
  std::vector<uint64_t> generation_ ABSL_GUARDED_BY(mu_);  // per slot
  std::vector<bool> live_slot_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> free_ ABSL_GUARDED_BY(mu_);  // oldest freed first: reuse comes late
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_OWNER_TABLE_H_
