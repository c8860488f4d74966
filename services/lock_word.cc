#include "services/lock_word.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "services/random64.h"

namespace ardma {

bool HolderWatch::Abandoned(uint64_t observed) {
  auto now = std::chrono::steady_clock::now();
  if (!watching_ || observed != value_) {
    watching_ = true;
    value_ = observed;
    since_ = now;
    return false;
  }
  return now - since_ > patience_;
}

absl::StatusOr<uint64_t> AcquireLockWord(Context& ctx, uint64_t addr, absl::Duration patience,
                                         std::string_view what) {
  uint64_t nonce = Random64() | 1;
  HolderWatch watch(patience);
  for (int round = 0; round < (1 << 30); ++round) {
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(addr, 0, nonce));
    if (cas.swapped) return nonce;
    if (watch.Abandoned(cas.observed)) {
      ARDMA_ASSIGN_OR_RETURN(CasResult steal, ctx.CompareAndSwap(addr, cas.observed, nonce));
      if (steal.swapped) return nonce;
      watch.Reset();
    }
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
  }
  return absl::AbortedError(absl::StrCat(ToAbsl(what), ": lock stayed taken"));
}

absl::Status ReleaseLockWord(Context& ctx, uint64_t addr, uint64_t nonce, std::string_view what) {
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(addr, nonce, 0));
  if (!cas.swapped) {
    return absl::AbortedError(absl::StrCat(ToAbsl(what), ": a lock was taken over while held"));
  }
  return absl::OkStatus();
}

}  // namespace ardma
