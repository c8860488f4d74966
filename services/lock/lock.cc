#include "services/lock/lock.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/slots.h"
#include "services/dht/dht_format.h"
#include "services/root_cache.h"
#include "services/slot_check.h"
#include "services/stable_hash.h"

namespace ardma::lock {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

constexpr int kMaxRestarts = 1000;
// An active waiter whose slot is still taken (more than kRingSlots live tickets) looks again
// this often.
constexpr absl::Duration kSlotPoll = absl::Milliseconds(2);
// How long the first live ticket may stay taken but not described in its slot. Its slot is free
// for it (every earlier ticket is released), so a taker that is alive describes it within a round
// trip or a slot poll; one that died between its FETCH_ADD and its CAS (a killed client, a server
// killed mid-request) never will. Waiting a whole default lease for it would outlast every waiter
// whose wait is shorter, and each new waiter starts its watch over, so the lock would stay stuck.
constexpr absl::Duration kClaimGrace = absl::Seconds(1);

struct Block {
  uint64_t addr = 0;
  uint64_t name_hash = 0, tail = 0, head = 0, fence = 0;
  bool sealed = false;  // then tail is the tail it had when sealed
  std::array<Slot, kRingSlots> ring{};

  Slot SlotOf(uint64_t t) const { return ring[t % kRingSlots]; }
  uint64_t SlotAddr(uint64_t t) const { return addr + kRingOffset + 8 * (t % kRingSlots); }
  // Ticket t may write its slot: the previous user (t - kRingSlots) is done with it.
  bool SlotFreeFor(uint64_t t) const {
    Slot s = SlotOf(t);
    if (t < kRingSlots) return s.state() == SlotState::kUnused;
    return s.state() == SlotState::kReleased && s.ticket() == ((t - kRingSlots) & kTicketMask);
  }
};

absl::StatusOr<Block> ReadBlock(Context& ctx, uint64_t addr) {
  char bytes[kBlockBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(addr, std::span<char>(bytes, sizeof(bytes))));
  Block b;
  b.addr = addr;
  uint64_t magic;
  std::memcpy(&magic, bytes, 8);
  if (magic != kMagic) {
    return StaleRootError(absl::DataLossError(absl::StrCat("no lock at address ", addr)));
  }
  std::memcpy(&b.name_hash, bytes + kNameHashOffset, 8);
  std::memcpy(&b.tail, bytes + kTailOffset, 8);
  std::memcpy(&b.head, bytes + kHeadOffset, 8);
  std::memcpy(&b.fence, bytes + kFenceOffset, 8);
  std::memcpy(b.ring.data(), bytes + kRingOffset, 8 * kRingSlots);
  if (b.tail & kSealed) {
    b.sealed = true;
    std::memcpy(&b.tail, bytes + kSealedTailOffset, 8);
  }
  return b;
}

// A lock block's bytes: no ticket live, `tail` the next ticket, `fence` tokens issued; sealed at
// `tail` if `sealed`.
std::string BlockImage(std::string_view name, uint64_t tail, uint64_t fence, bool sealed) {
  std::string block;
  block.reserve(kBlockBytes);
  ByteWriter w(&block);
  w.U64(kMagic);
  w.U64(StableHash(name));
  w.U64(sealed ? kSealed | tail : tail);
  w.U64(tail);  // head
  w.U64(fence);
  w.U64(tail);  // sealed tail
  block.resize(kRingOffset, '\0');
  // Ticket t may claim its slot once t - kRingSlots is released: say so for the next kRingSlots.
  std::array<uint64_t, kRingSlots> ring{};
  for (uint64_t t = tail; t < tail + kRingSlots; ++t) {
    if (t < kRingSlots) continue;
    uint64_t before = t - kRingSlots;
    ring[t % kRingSlots] =
        Slot::Make(before, SlotState::kReleased, false, false, 0, absl::ZeroDuration()).word;
  }
  for (uint64_t word : ring) w.U64(word);
  return block;
}

uint32_t SlotOfLock(std::string_view name) { return slots::SlotOf(kLockSpace, name); }

struct Evaluation {
  uint64_t first_live = 0;  // the lowest ticket before t not released (t if none)
  bool grantable = false;
};

// Whether ticket t (exclusive or not) may hold the lock by the FCFS rule, seen in `b`.
Evaluation Evaluate(const Block& b, uint64_t t, bool exclusive) {
  Evaluation e;
  uint64_t u = std::min(b.head, t);
  while (u < t && ViewTicket(b.SlotOf(u), u) == TicketView::kReleased) ++u;
  e.first_live = u;
  e.grantable = true;
  for (; u < t; ++u) {
    Slot s = b.SlotOf(u);
    TicketView view = ViewTicket(s, u);
    if (view == TicketView::kReleased) continue;
    if (!exclusive && view == TicketView::kLive && !s.exclusive()) continue;  // readers share
    e.grantable = false;
    break;
  }
  return e;
}

// After something was released: resumes (on the server) the parked waiters whose turn has come,
// and raises the head hint. Over RemoteContext it cannot resume anyone: it returns whether an
// active waiter needs a lock.kick.
absl::StatusOr<bool> WakeScan(Context& ctx, const Block& b) {
  Evaluation first = Evaluate(b, b.tail, /*exclusive=*/true);
  bool local = ctx.IsLocal();
  if (first.first_live > b.head && (local || first.first_live - b.head > kRingSlots / 2)) {
    ARDMA_RETURN_IF_ERROR(
        ctx.CompareAndSwap(b.addr + kHeadOffset, b.head, first.first_live).status());
  }
  bool kick = false;
  for (uint64_t u = first.first_live; u < b.tail; ++u) {
    Slot s = b.SlotOf(u);
    if (ViewTicket(s, u) != TicketView::kLive || s.state() != SlotState::kWaiting || !s.active()) {
      continue;
    }
    if (!Evaluate(b, u, s.exclusive()).grantable) {
      if (s.exclusive()) break;  // nobody after an exclusive waiter can be granted either
      continue;
    }
    if (!local) {
      kick = true;
      break;
    }
    ARDMA_RETURN_IF_ERROR(ctx.Resume(WaiterKey(b.addr, u)).status());
  }
  return kick;
}

// ---- Names ----

// The lock service's own table: unfenced (a lock's slot is that of its name in namespace "lock",
// not that of a key of table "locks").
std::string TargetArgs() {
  std::string out;
  dht::EncodeTarget(dht::Target{.name = kTable, .unfenced = true}, &out);
  return out;
}

// The address stored as a lock's DHT value.
absl::StatusOr<uint64_t> AddressIn(const dht::Reply& reply) {
  if (!reply.value.has_value() || reply.value->size() != 8) {
    return absl::DataLossError("lock: bad DHT entry");
  }
  uint64_t addr = 0;
  std::memcpy(&addr, reply.value->data(), 8);
  return addr;
}

// ---- Acquire ----

// Everything a waiter needs to go on; the continuation of a parked waiter.
struct Waiter {
  uint64_t addr = 0;
  uint64_t t = 0;
  bool exclusive = true;
  bool try_only = false;
  bool claimed = false;  // its slot says waiting
  absl::Duration lease;
  absl::Time give_up_at;
  LeaseWatch watch;
};

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

std::string EncodeContinuation(const Waiter& w) {
  std::string out;
  ByteWriter b(&out);
  b.U8(1);  // phase: continuation
  b.U64(w.addr);
  b.U64(w.t);
  b.U8(w.exclusive ? 1 : 0);
  b.U8(w.claimed ? 1 : 0);
  b.U64(static_cast<uint64_t>(absl::ToInt64Microseconds(w.lease)));
  b.U64(static_cast<uint64_t>(Micros(w.give_up_at)));
  b.U64(w.watch.ticket);
  b.U64(w.watch.word);
  b.U64(static_cast<uint64_t>(Micros(w.watch.since)));
  return out;
}

absl::StatusOr<Waiter> DecodeContinuation(ByteReader& r) {
  Waiter w;
  uint8_t exclusive, claimed;
  uint64_t lease_us, give_up_us, since_us;
  if (!r.U64(&w.addr) || !r.U64(&w.t) || !r.U8(&exclusive) || !r.U8(&claimed) ||
      !r.U64(&lease_us) || !r.U64(&give_up_us) || !r.U64(&w.watch.ticket) ||
      !r.U64(&w.watch.word) || !r.U64(&since_us) || !r.AtEnd()) {
    return absl::InvalidArgumentError("lock.acquire: bad continuation");
  }
  w.exclusive = exclusive != 0;
  w.claimed = claimed != 0;
  w.lease = absl::Microseconds(static_cast<int64_t>(lease_us));
  w.give_up_at = absl::FromUnixMicros(static_cast<int64_t>(give_up_us));
  w.watch.since = absl::FromUnixMicros(static_cast<int64_t>(since_us));
  return w;
}

std::string Key(const Waiter& w) { return WaiterKey(w.addr, w.t); }

std::string DropArgs(uint64_t addr, uint64_t t) {
  std::string out;
  ByteWriter b(&out);
  b.U64(addr);
  b.U64(t);
  return out;
}

// Makes the waiter's ticket a grant: takes a fencing token, then turns its slot held (from
// `expected`). nullopt if the slot changed first (an observer expired the ticket).
absl::StatusOr<std::optional<AcquireResult>> Grant(Context& ctx, const Waiter& w, Slot expected) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t fence, ctx.FetchAdd(w.addr + kFenceOffset, 1));
  Slot held =
      Slot::Make(w.t, SlotState::kHeld, w.exclusive, ctx.IsLocal(),
                 expected.state() == SlotState::kWaiting ? expected.changes() + 1 : 1, w.lease);
  ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                         ctx.CompareAndSwap(Block{w.addr}.SlotAddr(w.t), expected.word, held.word));
  if (!cas.swapped) return std::nullopt;
  if (ctx.IsLocal() && !w.claimed) {
    // A grant without a waiting phase: watch the connection from now on.
    ARDMA_RETURN_IF_ERROR(ctx.OnClose(Key(w), "lock.drop", DropArgs(w.addr, w.t)));
  }
  return AcquireResult{true, w.addr, w.t, fence + 1, held.word};
}

// Gives up ticket t (claimed, or with its slot free) and lets whoever it held up go on. Returns
// whether an active waiter needs a lock.kick (over RemoteContext).
absl::StatusOr<bool> Abandon(Context& ctx, const Waiter& w, const Block& b) {
  // Claimed: the slot holds our waiting word; else the free word the previous ticket left.
  Slot expected = b.SlotOf(w.t);
  Slot released =
      Slot::Make(w.t, SlotState::kReleased, w.exclusive, false, 0, absl::ZeroDuration());
  ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                         ctx.CompareAndSwap(b.SlotAddr(w.t), expected.word, released.word));
  if (ctx.IsLocal() && w.claimed) ARDMA_RETURN_IF_ERROR(ctx.OnClose(Key(w), "", ""));
  if (!cas.swapped) return false;  // an observer released it already
  ARDMA_ASSIGN_OR_RETURN(Block after, ReadBlock(ctx, w.addr));
  return WakeScan(ctx, after);
}

// Releases the first live ticket f if its slot word has not changed for its lease (as watched by
// `watch`). Returns true if it released it.
absl::StatusOr<bool> ExpireIfStale(Context& ctx, LeaseWatch& watch, const Block& b, uint64_t f) {
  Slot s = b.SlotOf(f);
  absl::Time now = absl::Now();
  if (watch.ticket != f || watch.word != s.word) {
    watch.ticket = f;
    watch.word = s.word;
    watch.since = now;
    return false;
  }
  bool claimed = ViewTicket(s, f) == TicketView::kLive;
  absl::Duration lease = claimed ? s.lease() : kClaimGrace;
  if (now - watch.since < lease) return false;
  Slot released =
      Slot::Make(f, SlotState::kReleased, claimed && s.exclusive(), false, 0, absl::ZeroDuration());
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(b.SlotAddr(f), s.word, released.word));
  watch.ticket = ~0ull;
  return cas.swapped;
}

// When a waiter next needs to look if nothing wakes it.
absl::Time NextLook(const Waiter& w, const Block& b, uint64_t first_live) {
  if (!w.claimed) return absl::Now() + kSlotPoll;  // waiting for the slot itself
  absl::Time at = w.give_up_at;
  if (first_live < w.t && w.watch.ticket == first_live) {
    Slot s = b.SlotOf(first_live);
    absl::Duration lease = ViewTicket(s, first_live) == TicketView::kLive ? s.lease() : kClaimGrace;
    at = std::min(at, w.watch.since + lease + absl::Milliseconds(1));
  }
  return at;
}

absl::StatusOr<Acquired> Proceed(Context& ctx, Waiter w);

}  // namespace

absl::StatusOr<std::optional<uint64_t>> Find(Context& ctx, std::string_view name) {
  absl::StatusOr<std::string> got = ctx.Call("dht.get", TargetArgs() + dht::EncodeKeyArgs(name));
  if (absl::IsNotFound(got.status())) return std::nullopt;
  ARDMA_RETURN_IF_ERROR(got.status());
  ARDMA_ASSIGN_OR_RETURN(dht::Reply reply, dht::DecodeReply(*got, dht::ReplyKind::kFlagAndValue));
  if (!reply.flag) return std::nullopt;
  return AddressIn(reply);
}

namespace {

// Publishes a new block holding `image` as the lock `name`, with dht.insert: of racing creators
// one wins, and each returns the winner's block.
absl::StatusOr<uint64_t> Publish(Context& ctx, std::string_view name, std::string_view image) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, heap::Allocate(ctx, kBlockBytes));
  absl::Status written = ctx.Write(addr, image);
  std::string value(8, '\0');
  std::memcpy(value.data(), &addr, 8);
  absl::StatusOr<std::string> inserted =
      written.ok() ? ctx.Call("dht.insert", TargetArgs() + dht::EncodePutArgs(name, value))
                   : absl::StatusOr<std::string>(written);
  absl::StatusOr<dht::Reply> reply =
      inserted.ok() ? dht::DecodeReply(*inserted, dht::ReplyKind::kFlagAndValue)
                    : absl::StatusOr<dht::Reply>(inserted.status());
  if (!reply.ok() || reply->flag) heap::Free(ctx, addr).IgnoreError();
  if (!reply.ok()) return reply.status();
  if (reply->flag) return AddressIn(*reply);  // someone else created it first
  return addr;
}

}  // namespace

absl::StatusOr<uint64_t> Resolve(Context& ctx, std::string_view name) {
  ARDMA_RETURN_IF_ERROR(CheckLockName(name));
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> found, Find(ctx, name));
  uint64_t addr = 0;
  if (found) {
    addr = *found;
  } else {
    ARDMA_ASSIGN_OR_RETURN(addr, Publish(ctx, name, BlockImage(name, 0, 0, /*sealed=*/false)));
  }
  // Checked once the block exists: a mover freezes the slot before it lists the locks to seal,
  // so either it seals this block or this sees the freeze. (A block made where the slot is not
  // served is never used.)
  ARDMA_RETURN_IF_ERROR(CheckSlotServed(ctx, SlotOfLock(name), /*write=*/true));
  return addr;
}

absl::StatusOr<Acquired> Acquire(Context& ctx, const AcquireArgs& args) {
  Waiter w;
  w.exclusive = args.exclusive;
  w.lease = args.lease;
  ARDMA_RETURN_IF_ERROR(CheckLease(w.lease));
  w.try_only = args.wait == absl::ZeroDuration();
  absl::Time now = absl::Now();
  // A try never times out: it answers as soon as it can give its ticket back.
  w.give_up_at = w.try_only || args.wait == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                     : now + args.wait;
  uint64_t addr = args.addr;
  if (addr == 0) {
    ARDMA_ASSIGN_OR_RETURN(addr, Resolve(ctx, args.name));
  }
  w.addr = addr;
  // Check the block before touching it: a cached address may be stale.
  ARDMA_ASSIGN_OR_RETURN(Block before, ReadBlock(ctx, addr));
  ARDMA_RETURN_IF_ERROR(CheckLockName(args.name));
  if (before.name_hash != StableHash(args.name)) {
    return StaleRootError(absl::DataLossError(
        absl::StrCat("the lock at ", addr, " is not '", ToAbsl(args.name), "'")));
  }
  if (before.sealed) return NotServedHere(ctx, SlotOfLock(args.name));
  ARDMA_ASSIGN_OR_RETURN(w.t, ctx.FetchAdd(addr + kTailOffset, 1));
  // Sealed since the read: no ticket was taken, so there is nothing to give back.
  if (w.t & kSealed) return NotServedHere(ctx, SlotOfLock(args.name));
  if (before.tail == w.t) {
    // Nobody took a ticket since the read, so it describes every ticket before ours.
    Evaluation e = Evaluate(before, w.t, w.exclusive);
    if (e.grantable && before.SlotFreeFor(w.t)) {
      ARDMA_ASSIGN_OR_RETURN(std::optional<AcquireResult> granted,
                             Grant(ctx, w, before.SlotOf(w.t)));
      if (granted) return Acquired(*granted);
    }
  }
  return Proceed(ctx, w);
}

namespace {

// The waiting loop: claim the slot, check the turn, expire a stale first ticket, wait.
absl::StatusOr<Acquired> Proceed(Context& ctx, Waiter w) {
  for (int round = 0; round < (1 << 30); ++round) {
    ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, w.addr));
    Slot mine = b.SlotOf(w.t);
    if (w.claimed &&
        (ViewTicket(mine, w.t) != TicketView::kLive || mine.state() != SlotState::kWaiting)) {
      // An observer released our ticket while we were slow: the turn is lost.
      if (ctx.IsLocal()) ARDMA_RETURN_IF_ERROR(ctx.OnClose(Key(w), "", ""));
      return absl::AbortedError("lock: this waiter's ticket expired before it noticed its turn");
    }
    bool can_claim = !w.claimed && b.SlotFreeFor(w.t);
    Evaluation e = Evaluate(b, w.t, w.exclusive);
    if (e.grantable && (w.claimed || can_claim)) {
      ARDMA_ASSIGN_OR_RETURN(std::optional<AcquireResult> granted, Grant(ctx, w, mine));
      if (!granted) continue;  // the slot changed: look again
      return Acquired(*granted);
    }
    if (w.try_only && (w.claimed || can_claim)) {
      ARDMA_ASSIGN_OR_RETURN(bool kick, Abandon(ctx, w, b));
      return Acquired(AcquireResult{.kick = kick});
    }
    // (A try whose slot is still taken waits for the slot, then gives its ticket back.)
    if (can_claim) {
      Slot waiting = Slot::Make(w.t, SlotState::kWaiting, w.exclusive, ctx.IsLocal(), 0, w.lease);
      ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                             ctx.CompareAndSwap(b.SlotAddr(w.t), mine.word, waiting.word));
      if (!cas.swapped) continue;
      w.claimed = true;
      if (ctx.IsLocal()) {
        ARDMA_RETURN_IF_ERROR(ctx.OnClose(Key(w), "lock.drop", DropArgs(w.addr, w.t)));
      }
      continue;  // look again with the slot claimed
    }
    if (e.first_live < w.t) {
      ARDMA_ASSIGN_OR_RETURN(bool expired, ExpireIfStale(ctx, w.watch, b, e.first_live));
      if (expired) {
        ARDMA_ASSIGN_OR_RETURN(Block after, ReadBlock(ctx, w.addr));
        ARDMA_RETURN_IF_ERROR(WakeScan(ctx, after).status());
        continue;
      }
    }
    if (absl::Now() >= w.give_up_at) {
      if (w.claimed || b.SlotFreeFor(w.t)) {
        ARDMA_RETURN_IF_ERROR(Abandon(ctx, w, b).status());
        return absl::DeadlineExceededError("lock: not acquired within the wait");
      }
    }
    if (!ctx.IsLocal()) {
      ARDMA_RETURN_IF_ERROR(ctx.Backoff(std::min(round, 10)));
      continue;
    }
    // Park until resumed (our turn may have come) or until the next look is due; the continuation
    // carries the ticket. Then look once more, in case the turn came before we parked: if there is
    // something to do, resume ourselves. A parked run never changes the lock itself, so a Resume
    // that raced with this look cannot find our ticket already granted by us.
    std::string continuation = EncodeContinuation(w);
    ARDMA_RETURN_IF_ERROR(ctx.Park(Key(w), {.resumable = true,
                                            .resume_at = NextLook(w, b, e.first_live),
                                            .resume_args = continuation}));
    ARDMA_ASSIGN_OR_RETURN(Block again, ReadBlock(ctx, w.addr));
    bool claimable = !w.claimed && again.SlotFreeFor(w.t);
    bool turn = Evaluate(again, w.t, w.exclusive).grantable;
    if ((turn && (w.claimed || claimable)) || (w.try_only && claimable)) {
      ARDMA_RETURN_IF_ERROR(ctx.Resume(Key(w)).status());
    }
    return Acquired(std::nullopt);  // parked: the answer comes with a Wake or a resumed run
  }
  return absl::AbortedError("lock: waited too many rounds");
}

}  // namespace

absl::StatusOr<Acquired> Continue(Context& ctx, std::string_view continuation) {
  ByteReader r(continuation);
  ARDMA_ASSIGN_OR_RETURN(Waiter w, DecodeContinuation(r));
  return Proceed(ctx, w);
}

// ---- Release, renew, drop, kick, inspect ----

namespace {

absl::Status NotHeld() {
  return absl::FailedPreconditionError(
      "lock: not held (its lease ran out and it was handed on, or it was released)");
}

}  // namespace

absl::StatusOr<bool> Release(Context& ctx, const Held& a) {
  Slot held{a.word};
  if (held.ticket() != (a.t & kTicketMask) || held.state() != SlotState::kHeld) return NotHeld();
  // The CAS first, then the read: the waiters to wake must be seen after the release. A waiter
  // may claim its slot and park, having looked before the release; read after the CAS, its slot
  // shows, so it is resumed (or kicked), and one that claims after the read sees the release
  // when it looks. (Reading first and scanning that copy lost such a waiter until its watch ran
  // out: a lease-long stall.) The CAS cannot succeed on memory that is not this ticket's held
  // slot, and the read checks the address.
  Slot released = held.With(SlotState::kReleased);
  ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                         ctx.CompareAndSwap(Block{a.addr}.SlotAddr(a.t), held.word, released.word));
  if (ctx.IsLocal()) ARDMA_RETURN_IF_ERROR(ctx.OnClose(WaiterKey(a.addr, a.t), "", ""));
  ARDMA_ASSIGN_OR_RETURN(Block after, ReadBlock(ctx, a.addr));
  if (!cas.swapped) return NotHeld();
  return WakeScan(ctx, after);
}

absl::StatusOr<uint64_t> Renew(Context& ctx, const Held& a, absl::Duration lease) {
  ARDMA_RETURN_IF_ERROR(CheckLease(lease));
  Slot held{a.word};
  if (held.ticket() != (a.t & kTicketMask) || held.state() != SlotState::kHeld) return NotHeld();
  Slot renewed = held.Changed(lease);
  uint64_t slot_addr = Block{a.addr}.SlotAddr(a.t);
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(slot_addr, held.word, renewed.word));
  if (!cas.swapped) return NotHeld();
  return renewed.word;
}

absl::Status Drop(Context& ctx, uint64_t addr, uint64_t t) {
  ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, addr));
  Slot s = b.SlotOf(t);
  if (ViewTicket(s, t) != TicketView::kLive) return absl::OkStatus();  // gone already
  Slot released = s.With(SlotState::kReleased);
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(b.SlotAddr(t), s.word, released.word));
  if (!cas.swapped) return absl::OkStatus();
  ARDMA_ASSIGN_OR_RETURN(Block after, ReadBlock(ctx, addr));  // fresh, as in Release
  return WakeScan(ctx, after).status();
}

absl::Status Kick(Context& ctx, uint64_t addr) {
  if (!ctx.IsLocal()) return absl::FailedPreconditionError("lock.kick runs on the server");
  ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, addr));
  return WakeScan(ctx, b).status();
}

absl::StatusOr<Inspection> Inspect(Context& ctx, std::string_view name) {
  Inspection out;
  ARDMA_ASSIGN_OR_RETURN(out.addr, Resolve(ctx, name));
  ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, out.addr));
  if (b.sealed) return NotServedHere(ctx, SlotOfLock(name));
  out.next_ticket = b.tail;
  out.fence = b.fence;
  for (uint64_t u = Evaluate(b, b.tail, true).first_live; u < b.tail; ++u) {
    Slot s = b.SlotOf(u);
    TicketView view = ViewTicket(s, u);
    if (view == TicketView::kReleased) continue;
    if (view == TicketView::kLive && s.state() == SlotState::kHeld) {
      ++out.holders;
    } else {
      ++out.waiters;
    }
  }
  return out;
}

// ---- Moving ----

absl::StatusOr<SealedLock> Seal(Context& ctx, std::string_view name) {
  ARDMA_RETURN_IF_ERROR(CheckLockName(name));
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> found, Find(ctx, name));
  if (!found) return absl::NotFoundError(absl::StrCat("no lock '", ToAbsl(name), "' here"));
  for (int attempt = 0; attempt < kMaxRestarts; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, *found));
    if (!b.sealed) {
      // The tail to keep first, then the seal; a ticket taken in between fails the CAS.
      ARDMA_RETURN_IF_ERROR(ctx.WriteU64(b.addr + kSealedTailOffset, b.tail));
      ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                             ctx.CompareAndSwap(b.addr + kTailOffset, b.tail, kSealed | b.tail));
      if (!cas.swapped) continue;
    }
    return SealedLock{std::string(name), b.addr, b.tail, b.fence};
  }
  return absl::AbortedError("lock: tickets came too fast to seal the lock");
}

absl::StatusOr<bool> Drained(Context& ctx, SealedLock& lock, LeaseWatch& watch) {
  ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, lock.addr));
  if (!b.sealed) return absl::FailedPreconditionError("lock: not sealed");
  lock.fence = b.fence;
  uint64_t first_live = Evaluate(b, b.tail, /*exclusive=*/true).first_live;
  if (first_live == b.tail) return true;
  ARDMA_ASSIGN_OR_RETURN(bool expired, ExpireIfStale(ctx, watch, b, first_live));
  if (expired) {
    ARDMA_ASSIGN_OR_RETURN(Block after, ReadBlock(ctx, lock.addr));
    ARDMA_RETURN_IF_ERROR(WakeScan(ctx, after).status());
  }
  return false;
}

absl::Status Unseal(Context& ctx, uint64_t addr) {
  for (int attempt = 0; attempt < kMaxRestarts; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, addr));
    if (!b.sealed) return absl::OkStatus();
    // Tickets taken while sealed were never tickets: the tail goes back to the sealed one.
    ARDMA_ASSIGN_OR_RETURN(uint64_t tail, ctx.ReadU64(addr + kTailOffset));
    if (!(tail & kSealed)) return absl::OkStatus();
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(addr + kTailOffset, tail, b.tail));
    if (cas.swapped) return absl::OkStatus();
  }
  return absl::AbortedError("lock: tickets came too fast to unseal the lock");
}

absl::StatusOr<uint64_t> Adopt(Context& ctx, const SealedLock& from) {
  ARDMA_RETURN_IF_ERROR(CheckLockName(from.name));
  std::string image = BlockImage(from.name, from.tail, from.fence, /*sealed=*/true);
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> found, Find(ctx, from.name));
  if (!found) return Publish(ctx, from.name, image);
  // A block left here: sealed, if the lock moved away from here before, or never used, if made
  // by a taker while the slot was not served here. Either way no ticket of it is live.
  ARDMA_ASSIGN_OR_RETURN(Block b, ReadBlock(ctx, *found));
  if (!b.sealed && b.tail != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lock '", ToAbsl(from.name), "' is already served by the receiving server"));
  }
  ARDMA_RETURN_IF_ERROR(ctx.Write(*found, image));
  return *found;
}

}  // namespace ardma::lock
