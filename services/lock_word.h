// Lock words, and the one rule by which a service takes over a word whose holder died.
//
// Services guard short critical sections with a word in the heap, taken with CAS by active code and
// by RDMA-mode clients alike. A holder can die holding it (a killed client), so the word names its
// holder's lock owner (LockOwner in core/context/context.h): ardmad ends an owner when its
// connection closes (or the server restarts), and a waiter takes a word over only from an owner
// that has ended — never from one that is slow, however long it holds on. AcquireLockWord and
// ReleaseLockWord are the plain lock built on that: 0 free, else the holder's token with bits of
// its own.
//
//   ARDMA_ASSIGN_OR_RETURN(uint64_t held, AcquireLockWord(ctx, addr, "dfs"));
//   ... critical section ...
//   ARDMA_RETURN_IF_ERROR(ReleaseLockWord(ctx, addr, held, "dfs"));
#ifndef ARDMA_SERVICES_LOCK_WORD_H_
#define ARDMA_SERVICES_LOCK_WORD_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/context/context.h"

namespace ardma {

// A value for a word this context's owner takes now: its token with fresh random bits (odd, never
// 0), so two takings by one owner differ.
uint64_t NewHolderValue(Context& ctx);
// Whether the owner behind `value` (a NewHolderValue) has ended: one READ of its slot in the
// owner table. False for anonymous values and when `ctx` knows no owner table.
absl::StatusOr<bool> HolderEnded(Context& ctx, uint64_t value);
// The same for a word that keeps only its holder's slot: true once nobody holds that slot. (A slot
// that a new connection took before anyone looked keeps the word until that connection ends too.)
absl::StatusOr<bool> SlotVacant(Context& ctx, uint64_t slot);
// Whether a waiter in its `round`th back-off should look at the holder's liveness (a READ in RDMA
// mode): every fourth round from the fourth.
inline bool TimeToCheckHolder(int round) { return round >= 4 && round % 4 == 0; }

// Takes the lock word at `addr`, waiting with ctx.Backoff; a word whose holder ended is taken over.
// Returns the value to release with. ABORTED "<what>: lock stayed taken" after a very long wait;
// DEADLINE_EXCEEDED past the request's.
absl::StatusOr<uint64_t> AcquireLockWord(Context& ctx, uint64_t addr, std::string_view what);
// Releases a word taken as `held`. ABORTED "<what>: a lock was taken over while held" if someone
// took it over meanwhile (this holder's connection had ended).
absl::Status ReleaseLockWord(Context& ctx, uint64_t addr, uint64_t held, std::string_view what);

}  // namespace ardma

#endif  // ARDMA_SERVICES_LOCK_WORD_H_
