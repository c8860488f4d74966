// ParkingLot: requests whose active function called Context::Park(key), waiting for a Wake(key).
//
// A parked request no longer holds a thread: its function has returned and only its Responder (how
// to answer it) waits here, in a FIFO queue per key. Wake hands the waker's result to the oldest
// live request on the key. Because a Wake can arrive before the parking function has returned (it
// runs on another thread), an entry remembers an early result and delivers it when the function
// returns. Entries whose connection is gone are skipped by Wake; entries past their deadline get
// DEADLINE_EXCEEDED from Expire, which the server calls when NextEvent comes (it learns of each
// new one from the event listener) and when a connection closes — never on a tick.
//
// Thread-safe. Responders are always invoked without the lot's lock held.
#ifndef ARDMA_CORE_ACTIVE_PARKING_LOT_H_
#define ARDMA_CORE_ACTIVE_PARKING_LOT_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ardma {

// How an EXECUTE is answered when its answer comes later than its function's return.
class Responder {
 public:
  virtual ~Responder() = default;
  // Called at most once per request.
  virtual void Respond(absl::StatusOr<std::string> result) = 0;
  // The same, from a caller that has just read the steady clock (`steady_ns`, nanoseconds since
  // its epoch): a responder that times its request need not read it again.
  virtual void RespondAt(absl::StatusOr<std::string> result, uint64_t steady_ns) {
    (void)steady_ns;
    Respond(std::move(result));
  }
  // False once the requesting connection is gone (a wake then goes to the next waiter).
  virtual bool Alive() const = 0;
};

class ParkingLot {
 public:
  struct Entry;

  ParkingLot() = default;
  ParkingLot(const ParkingLot&) = delete;
  ParkingLot& operator=(const ParkingLot&) = delete;

  // Runs a resumable request again (the server queues its function with the resume arguments).
  using ResumeFn = std::function<void()>;

  // Queues a request under `key`. Its function is still running; call FunctionReturned after it.
  // With `resume`, the request is resumable: Resume(key), or Expire once `resume_at` has passed,
  // unparks it and calls `resume` instead of answering it.
  std::shared_ptr<Entry> Park(std::string_view key, std::shared_ptr<Responder> responder,
                              absl::Time deadline, ResumeFn resume = nullptr,
                              absl::Time resume_at = absl::InfiniteFuture());
  // Call once the parking function has returned with `status`. If it was already woken, the wake
  // result is sent now. If the function failed and nobody woke it, it is unparked and the error is
  // sent. Otherwise it stays parked.
  void FunctionReturned(const std::shared_ptr<Entry>& entry, const absl::Status& status);
  // Gives `result` to the oldest live request parked on `key`; false if there is none.
  bool Wake(std::string_view key, std::string_view result);
  // Resumes the oldest live resumable request parked on `key` (once its function has returned);
  // false if there is none. Requests that are not resumable are left where they are.
  bool Resume(std::string_view key);
  // Answers DEADLINE_EXCEEDED to parked requests whose deadline is before `now`, resumes those
  // whose resume time has come, and forgets requests whose connection is gone. Returns how many
  // were answered or resumed.
  int Expire(absl::Time now);

  // The earliest deadline or resume time of a parked request whose function has returned (what
  // Expire acts on next); InfiniteFuture if there is none.
  absl::Time NextEvent() const;
  // `listener` is called (without the lot's lock) with a request's next event time when its
  // function returns and it stays parked: the server's timer may need to fire sooner.
  void SetEventListener(std::function<void(absl::Time)> listener);

  // Requests parked right now (including ones whose function has not returned yet).
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::deque<std::shared_ptr<Entry>>> queues_ ABSL_GUARDED_BY(mu_);
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(absl::Time)> listener_ ABSL_GUARDED_BY(mu_);
};

struct ParkingLot::Entry {
  std::string key;
  std::shared_ptr<Responder> responder;
  absl::Time deadline;
  // Guarded by the lot's mutex.
  bool function_running = true;
  bool queued = true;  // still in its key's queue
  std::optional<std::string> early_result;
  ResumeFn resume;  // set for resumable requests
  absl::Time resume_at = absl::InfiniteFuture();
  bool resume_requested = false;  // resumed while its function was still running

  // When Expire has something to do with it: its deadline, or its resume time if sooner.
  absl::Time NextEvent() const { return resume != nullptr ? std::min(deadline, resume_at) : deadline; }
};

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_PARKING_LOT_H_
