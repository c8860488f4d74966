// Lock words and the one rule by which a service takes over a word whose holder died.
//
// Services guard short critical sections with a word in the heap, taken with CAS by active code and
// by RDMA-mode clients alike. A holder can die holding it (a killed client), so a waiter that has
// seen the very same value for a service-chosen patience takes the word over with a CAS from that
// value. HolderWatch is that rule, on one clock (steady); AcquireLockWord/ReleaseLockWord are the
// plain nonce lock built on it (0 free, else the holder's odd nonce).
//
//   ARDMA_ASSIGN_OR_RETURN(uint64_t nonce, AcquireLockWord(ctx, addr, absl::Seconds(2), "dfs"));
//   ... critical section ...
//   ARDMA_RETURN_IF_ERROR(ReleaseLockWord(ctx, addr, nonce, "dfs"));
//
// A HolderWatch belongs to one waiter (one thread).
#ifndef ARDMA_SERVICES_LOCK_WORD_H_
#define ARDMA_SERVICES_LOCK_WORD_H_

#include <chrono>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/context/context.h"

namespace ardma {

class HolderWatch {
 public:
  explicit HolderWatch(absl::Duration patience) : patience_(absl::ToChronoNanoseconds(patience)) {}

  // Notes that the word holds `observed` now. True once that same value has been seen for the
  // patience: its holder is taken to have died, and the caller may CAS the word from `observed`.
  bool Abandoned(uint64_t observed);
  // Starts the wait over (after a takeover was lost to someone else).
  void Reset() { watching_ = false; }

 private:
  std::chrono::nanoseconds patience_;
  bool watching_ = false;
  uint64_t value_ = 0;
  std::chrono::steady_clock::time_point since_;
};

// Takes the nonce lock word at `addr`, waiting with ctx.Backoff; a word its holder abandoned
// (HolderWatch with `patience`) is taken over. Returns the nonce to release with. ABORTED
// "<what>: lock stayed taken" after a very long wait; DEADLINE_EXCEEDED past the request's.
absl::StatusOr<uint64_t> AcquireLockWord(Context& ctx, uint64_t addr, absl::Duration patience,
                                         std::string_view what);
// Releases a word taken with `nonce`. ABORTED "<what>: a lock was taken over while held" if
// someone took it over meanwhile (the caller held it longer than the patience).
absl::Status ReleaseLockWord(Context& ctx, uint64_t addr, uint64_t nonce, std::string_view what);

}  // namespace ardma

#endif  // ARDMA_SERVICES_LOCK_WORD_H_
