// CallTable: the part every Transport shares — the calls that wait for a response, matched by
// request id; synchronous waiters and asynchronous callbacks with their deadlines; the one thread
// at a time that reads the transport (the "reader role"); and breaking, which fails every call,
// waiting or later, with one UNAVAILABLE status.
//
// A transport supplies only how to send (before registering nothing here is sent) and one "step"
// of reading: read or progress what has arrived, hand each response to Complete(), and return
// after a bounded wait. Whoever waits reads: a synchronous caller takes the reader role if nobody
// has it and runs steps until its own responses have come, so a call on an idle transport costs no
// thread hand-off; asynchronous calls are completed by whichever thread reads, or by a background
// thread running ServeAsync() while no caller does.
//
//   CallTable calls;
//   ARDMA_ASSIGN_OR_RETURN(CallTable::Expected expected, calls.Expect(ids));
//   ... send the frames ...
//   return calls.Await(expected, deadline, [&] { return ReadSome(); });
//
// Thread-safe.
#ifndef ARDMA_CORE_CLIENT_CALL_TABLE_H_
#define ARDMA_CORE_CLIENT_CALL_TABLE_H_

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/fixed_array.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/client/transport.h"

namespace ardma {

class CallTable {
 public:
  // One bounded unit of the transport's reading, run in the reader role without the table's lock.
  // Returns whether the caller should look at the clock now (false: still polling hot).
  using Step = absl::FunctionRef<bool()>;

  struct Call {
    // Set under mu_ once `result` is; a reader polls it without the lock.
    std::atomic<bool> done{false};
    bool transport_failed = false;  // done because the transport broke, not by an answer
    ResponsePayload result = absl::UnknownError("no response");
    ResponseCallback callback;  // set for asynchronous calls
    absl::Time deadline;
  };
  // Synchronous calls under `ids`, in that order, for Expect to register and Await to wait for.
  // The table refers to them where they are, so an Expected stays put (it is neither copied nor
  // moved) and outlives its Await; a few calls take no allocation.
  class Expected {
   public:
    explicit Expected(absl::Span<const uint64_t> ids)
        : ids_(ids.begin(), ids.end()), calls_(ids.size()) {}
    Expected(const Expected&) = delete;
    Expected& operator=(const Expected&) = delete;

   private:
    friend class CallTable;
    absl::InlinedVector<uint64_t, 4> ids_;
    absl::FixedArray<Call, 4> calls_;
  };

  CallTable();
  ~CallTable();
  CallTable(const CallTable&) = delete;
  CallTable& operator=(const CallTable&) = delete;

  // Registers `expected`'s calls, before their requests are sent; the transport's failure if it
  // is broken.
  absl::Status Expect(Expected& expected);
  // Waits until every expected call has its response, running `step` whenever nobody else reads,
  // and moves the responses to `results` (one per call). DEADLINE_EXCEEDED once `deadline`
  // passes; the transport's UNAVAILABLE once it breaks. Either way the calls are forgotten, and a
  // late answer is dropped.
  absl::Status Await(Expected& expected, absl::Time deadline, Step step,
                     absl::Span<ResponsePayload> results);

  // Registers an asynchronous call, before its request is sent. False if the transport is broken;
  // `done` has then run with its failure.
  bool ExpectAsync(uint64_t id, absl::Time deadline, ResponseCallback done);
  // Its request could not be sent: runs its callback with `status` (if it has not run).
  void FailAsync(uint64_t id, const absl::Status& status);
  // Asynchronous calls that still wait.
  size_t async_pending() const;

  // The response to request `id` (dropped if nobody waits for it any more). Runs an asynchronous
  // call's callback on the calling thread, without the table's lock.
  void Complete(uint64_t id, ResponsePayload result);

  // Fails every call, waiting or later, with UNAVAILABLE and `status`'s message (the first
  // failure's message sticks). True the first time.
  bool Break(const absl::Status& status);
  // Break, and ServeAsync returns.
  void Close();
  // OK, or the failure every call gets.
  absl::Status failure() const;

  // For a background thread: runs `step` in the reader role while asynchronous calls wait and no
  // synchronous caller reads, fails those whose deadline passed with DEADLINE_EXCEEDED, and
  // returns once the table is closed (or, unless `until_closed`, broken). While asynchronous
  // calls wait, `idle_tick` bounds a wait for the reader role, so their deadlines are kept to
  // within it even while a synchronous caller reads.
  void ServeAsync(Step step, absl::Duration idle_tick, bool until_closed = false);
  // Fails the asynchronous calls whose deadline is at or before `now` with DEADLINE_EXCEEDED.
  void ExpireAsync(absl::Time now);
  // The earliest deadline of the asynchronous calls waiting (InfiniteFuture: none).
  absl::Time NextAsyncDeadline() const;

 private:
  // Takes the reader role, runs one step (or, given `until_done`, steps until that call is done
  // or the step says the clock is due), gives it back; called with mu_ held.
  bool StepAsReader(Step step, const Call* until_done = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Asynchronous calls are owned here; synchronous ones (no owner) by their Expected.
  absl::flat_hash_map<uint64_t, std::shared_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  size_t async_pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool reader_active_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> broken_{false};  // failure_ is set: failure() reads it without the lock
  absl::CondVar changed_;  // a response arrived, the reader role was given back, or it broke
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_CALL_TABLE_H_
