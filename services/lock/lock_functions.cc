// The "lock" active-code library: each function parses its arguments, runs the algorithm
// (lock.h) and encodes the result (lock_format.h).
//
//   lock.acquire  phase 0: see EncodeAcquireArgs; phase 1: a parked waiter's continuation
//                 -> AcquireResult (granted:u8 [addr ticket token word]); "" while parked
//   lock.release  addr, ticket, word            -> kick:u8 (an active waiter needs a Resume)
//   lock.renew    addr, ticket, word, lease_us  -> word:u64
//   lock.drop     addr, ticket                  (close hook: release whatever the ticket holds)
//   lock.kick     addr                          (resume active waiters whose turn came)
//   lock.inspect  Str16 name                    -> addr next_ticket fence holders waiters (u64s)
// acquire and inspect answer a lock that is not served here with the redirect status
// (slots::RedirectStatus; it crosses the wire whole).
#include <algorithm>

#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/lock/lock.h"

namespace ardma::lock::functions {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

absl::Duration FromMicros(uint64_t us) {
  return absl::Microseconds(static_cast<int64_t>(std::min<uint64_t>(us, INT64_MAX)));
}

std::string Encode(const Acquired& acquired) {
  return acquired.has_value() ? EncodeAcquireResult(*acquired) : std::string();
}

absl::StatusOr<std::string> Acquire(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint8_t phase;
  if (!r.U8(&phase)) return absl::InvalidArgumentError("lock.acquire: no arguments");
  if (phase == 1) {
    ARDMA_ASSIGN_OR_RETURN(Acquired acquired, Continue(ctx, args.substr(1)));
    return Encode(acquired);
  }
  if (phase != 0) return absl::InvalidArgumentError("lock.acquire: unknown phase");
  AcquireArgs a;
  uint8_t exclusive;
  uint64_t wait_us, lease_us;
  if (!r.Str16(&a.name) || !r.U8(&exclusive) || !r.U64(&wait_us) || !r.U64(&lease_us) ||
      !r.U64(&a.addr) || !r.AtEnd()) {
    return absl::InvalidArgumentError("lock.acquire: bad arguments");
  }
  a.exclusive = exclusive != 0;
  a.wait = wait_us >= (1ull << 62) ? absl::InfiniteDuration() : FromMicros(wait_us);
  a.lease = FromMicros(lease_us);
  ARDMA_ASSIGN_OR_RETURN(Acquired acquired, lock::Acquire(ctx, a));
  return Encode(acquired);
}

absl::StatusOr<Held> ParseHeld(ByteReader& r, bool with_word) {
  Held a;
  if (!r.U64(&a.addr) || !r.U64(&a.t) || (with_word && !r.U64(&a.word))) {
    return absl::InvalidArgumentError("lock: bad arguments");
  }
  return a;
}

absl::StatusOr<std::string> Release(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Held a, ParseHeld(r, /*with_word=*/true));
  if (!r.AtEnd()) return absl::InvalidArgumentError("lock.release: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(bool kick, lock::Release(ctx, a));
  return std::string(1, kick ? '\1' : '\0');
}

absl::StatusOr<std::string> Renew(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Held a, ParseHeld(r, /*with_word=*/true));
  uint64_t lease_us;
  if (!r.U64(&lease_us) || !r.AtEnd()) return absl::InvalidArgumentError("lock.renew: bad lease");
  ARDMA_ASSIGN_OR_RETURN(uint64_t word, lock::Renew(ctx, a, FromMicros(lease_us)));
  std::string out;
  ByteWriter(&out).U64(word);
  return out;
}

absl::StatusOr<std::string> Drop(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Held a, ParseHeld(r, /*with_word=*/false));
  ARDMA_RETURN_IF_ERROR(lock::Drop(ctx, a.addr, a.t));
  return std::string();
}

absl::StatusOr<std::string> Kick(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t addr;
  if (!r.U64(&addr) || !r.AtEnd()) return absl::InvalidArgumentError("lock.kick: bad arguments");
  ARDMA_RETURN_IF_ERROR(lock::Kick(ctx, addr));
  return std::string();
}

absl::StatusOr<std::string> Inspect(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name) || !r.AtEnd()) return absl::InvalidArgumentError("lock.inspect: bad name");
  ARDMA_ASSIGN_OR_RETURN(Inspection i, lock::Inspect(ctx, name));
  std::string out;
  ByteWriter w(&out);
  w.U64(i.addr);
  w.U64(i.next_ticket);
  w.U64(i.fence);
  w.U64(i.holders);
  w.U64(i.waiters);
  return out;
}

}  // namespace
}  // namespace ardma::lock::functions

ARDMA_ACTIVE_LIBRARY(lock, {"lock.acquire", &ardma::lock::functions::Acquire},
                     {"lock.release", &ardma::lock::functions::Release},
                     {"lock.renew", &ardma::lock::functions::Renew},
                     {"lock.drop", &ardma::lock::functions::Drop},
                     {"lock.kick", &ardma::lock::functions::Kick},
                     {"lock.inspect", &ardma::lock::functions::Inspect});
