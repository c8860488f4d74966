#include "core/server/slot_replication.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "core/slots.h"

namespace ardma {

std::string EncodeReplicaOrder(const ReplicaOrder& order, std::string_view args) {
  std::string out(kReplicaOrderBytes, '\0');
  std::memcpy(out.data(), &order.slot, 4);
  std::memcpy(out.data() + 4, &order.incarnation, 8);
  std::memcpy(out.data() + 12, &order.seq, 8);
  out.append(args);
  return out;
}

absl::StatusOr<std::pair<ReplicaOrder, std::string_view>> DecodeReplicaOrder(
    std::string_view args) {
  ReplicaOrder order;
  if (args.size() < kReplicaOrderBytes) {
    return absl::InvalidArgumentError("a replicated write without its order");
  }
  std::memcpy(&order.slot, args.data(), 4);
  std::memcpy(&order.incarnation, args.data() + 4, 8);
  std::memcpy(&order.seq, args.data() + 12, 8);
  if (order.slot >= slots::kSlots || order.seq == 0 || order.incarnation == 0) {
    return absl::InvalidArgumentError("a replicated write with a malformed order");
  }
  return std::make_pair(order, args.substr(kReplicaOrderBytes));
}

std::string EncodeReplicaBase(const std::vector<ReplicaOrder>& marks) {
  std::string out;
  out.reserve(marks.size() * kReplicaOrderBytes);
  for (const ReplicaOrder& mark : marks) out += EncodeReplicaOrder(mark, "");
  return out;
}

absl::StatusOr<std::vector<ReplicaOrder>> DecodeReplicaBase(std::string_view args) {
  if (args.size() % kReplicaOrderBytes != 0) {
    return absl::InvalidArgumentError("a replica base that is not a list of orders");
  }
  std::vector<ReplicaOrder> marks(args.size() / kReplicaOrderBytes);
  for (size_t i = 0; i < marks.size(); ++i) {
    const char* at = args.data() + i * kReplicaOrderBytes;
    std::memcpy(&marks[i].slot, at, 4);
    std::memcpy(&marks[i].incarnation, at + 4, 8);
    std::memcpy(&marks[i].seq, at + 12, 8);
    if (marks[i].slot >= slots::kSlots || marks[i].incarnation == 0) {
      return absl::InvalidArgumentError("a replica base with a malformed order");
    }
  }
  return marks;
}

namespace {

// At most once a second: a replica that is down fails every write until the map drops it.
bool TimeToWarn() {
  static std::atomic<int64_t> last_ns{0};
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_ns.load(std::memory_order_relaxed);
  return now - last >= 1'000'000'000 &&
         last_ns.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

uint64_t RandomIncarnation() {
  std::random_device device;
  uint64_t value = 0;
  while (value == 0) value = (uint64_t{device()} << 32) | device();
  return value;
}

}  // namespace

SlotReplication::SlotReplication(PeerCaller* peers)
    : peers_(peers),
      incarnation_(RandomIncarnation()),
      writable_until_ns_(absl::ToUnixNanos(absl::InfiniteFuture())),
      replica_of_(slots::kSlots, false),
      owned_(slots::kSlots, false),
      filling_(slots::kSlots, 0),
      issued_(slots::kSlots, 0),
      sent_(slots::kSlots, 0),
      applied_(slots::kSlots) {}

void SlotReplication::SetRoles(std::vector<std::string> replicas, std::vector<bool> replica_of,
                               const std::vector<uint32_t>& owned) {
  replica_of.resize(slots::kSlots, false);
  std::vector<bool> owns(slots::kSlots, false);
  for (uint32_t slot : owned) {
    if (slot < slots::kSlots) owns[slot] = true;
  }
  absl::MutexLock lock(&mu_);
  // Promoted: slots this member replicated and owns now. Their order is this member's own from
  // here (the old primary's is over), so every replica is filled with them: one that missed a
  // write, or applied one this member never got (with several replicas, a write the old primary
  // could not get acknowledged), takes this member's copy and no write before that.
  std::vector<uint32_t> promoted;
  for (uint32_t slot = 0; slot < slots::kSlots; ++slot) {
    if (owns[slot] && !owned_[slot] && replica_of_[slot]) promoted.push_back(slot);
  }
  for (const std::string& replica : replicas) {
    if (std::find(replicas_.begin(), replicas_.end(), replica) == replicas_.end()) {
      AddFill(replica, owned);  // new to the list: it holds nothing of this member's slots
    } else if (!promoted.empty()) {
      AddFill(replica, promoted);
    }
  }
  for (auto it = unfilled_.begin(); it != unfilled_.end();) {
    if (std::find(replicas.begin(), replicas.end(), it->first) != replicas.end()) {
      ++it;
      continue;
    }
    for (uint32_t slot : it->second) FillEnded(it->first, slot);  // no longer a replica
    it = unfilled_.erase(it);
  }
  replicas_ = std::move(replicas);
  replica_of_ = std::move(replica_of);
  owned_ = std::move(owns);
  ++changes_;
}

void SlotReplication::AddFill(const std::string& replica, const std::vector<uint32_t>& slots) {
  for (uint32_t slot : slots) {
    // Every slot, also one without a write in this member's order: its keys may have come from
    // elsewhere (a fill, a memory file), and the replica takes the slot's writes only after a
    // base from this member.
    if (unfilled_[replica].insert(slot).second) {
      ++filling_[slot];
      if (++pending_[replica] == 1) ++changes_;  // (out of sync now)
    }
  }
  if (unfilled_[replica].empty()) unfilled_.erase(replica);
}

std::optional<std::pair<std::string, std::vector<uint32_t>>> SlotReplication::NextFill(
    absl::Time deadline, uint64_t* changes) {
  absl::MutexLock lock(&mu_);
  auto waiting = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !unfilled_.empty() || (changes != nullptr && *changes != changes_);
  };
  const bool woken = mu_.AwaitWithDeadline(absl::Condition(&waiting), deadline);
  if (changes != nullptr) *changes = changes_;
  if (!woken || unfilled_.empty()) return std::nullopt;
  auto first = unfilled_.begin();
  std::pair<std::string, std::vector<uint32_t>> fill(
      first->first, std::vector<uint32_t>(first->second.begin(), first->second.end()));
  unfilled_.erase(first);
  // Only slots still owned here are filled (a slot given away since needs none).
  std::erase_if(fill.second, [&](uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (owned_[slot]) return false;
    FillEnded(fill.first, slot);
    return true;
  });
  return fill;
}

void SlotReplication::Wake() {
  absl::MutexLock lock(&mu_);
  ++changes_;
}

void SlotReplication::Filled(const std::string& replica, const std::vector<uint32_t>& slots) {
  absl::MutexLock lock(&mu_);
  for (uint32_t slot : slots) FillEnded(replica, slot);
}

void SlotReplication::Unfilled(const std::string& replica, const std::vector<uint32_t>& slots) {
  absl::MutexLock lock(&mu_);
  const bool listed = std::find(replicas_.begin(), replicas_.end(), replica) != replicas_.end();
  for (uint32_t slot : slots) {
    // Waiting again (counted still), unless no longer a replica or waiting already.
    if (!listed || !unfilled_[replica].insert(slot).second) FillEnded(replica, slot);
  }
  if (unfilled_[replica].empty()) unfilled_.erase(replica);
}

size_t SlotReplication::fills_waiting() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [replica, slots] : unfilled_) n += slots.size();
  return n;
}

std::vector<std::string> SlotReplication::InSync() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> synced;
  for (const std::string& replica : replicas_) {
    if (!pending_.contains(replica)) synced.push_back(replica);
  }
  return synced;
}

bool SlotReplication::AwaitForwarded(const std::vector<uint32_t>& slots, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return std::all_of(slots.begin(), slots.end(),
                       [&](uint32_t s) { return sent_[s] >= issued_[s]; });
  };
  return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

std::vector<ReplicaOrder> SlotReplication::StreamMarks(const std::vector<uint32_t>& slots) const {
  absl::MutexLock lock(&mu_);
  std::vector<ReplicaOrder> marks;
  marks.reserve(slots.size());
  for (uint32_t slot : slots) {
    marks.push_back({.slot = slot, .incarnation = incarnation_, .seq = issued_[slot]});
  }
  return marks;
}

void SlotReplication::SetWritableUntil(absl::Time until) {
  writable_until_ns_.store(absl::ToUnixNanos(until), std::memory_order_relaxed);
}

bool SlotReplication::Fenced() const {
  return absl::ToUnixNanos(absl::Now()) >= writable_until_ns_.load(std::memory_order_relaxed);
}

absl::StatusOr<Replication::Ticket> SlotReplication::Order(uint32_t slot) {
  if (slot >= slots::kSlots) return absl::InvalidArgumentError("no such slot");
  if (Fenced()) {
    return absl::UnavailableError(absl::StrCat(
        "this member is fenced: it could not renew its cluster membership in time, so another "
        "member may be the primary of slot ", slot, " by now; the write was not made"));
  }
  absl::MutexLock lock(&mu_);
  // (With no live replica left — the map dropped them — a write still takes its place in the
  // order, acknowledged by this member alone: a replica placed later is filled with it.)
  if (filling_[slot] > 0) {
    // A replica lacks the slot's earlier writes: it is being filled. Clients wait and retry.
    return slots::RedirectStatus({.frozen = true, .slot = slot, .epoch = 0, .owner = 0});
  }
  return Ticket{slot, ++issued_[slot]};
}

bool SlotReplication::Replicates(uint32_t slot) const {
  absl::MutexLock lock(&mu_);
  return slot < slots::kSlots && replica_of_[slot];
}

bool SlotReplication::AwaitTurn(const Ticket& ticket, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto turn = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return sent_[ticket.slot] + 1 >= ticket.seq;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&turn), deadline);
}

void SlotReplication::PassTurn(const Ticket& ticket) {
  absl::MutexLock lock(&mu_);
  if (sent_[ticket.slot] < ticket.seq) sent_[ticket.slot] = ticket.seq;
}

absl::Status SlotReplication::Forward(const Ticket& ticket, std::string_view function,
                                      std::string_view args, absl::Time deadline) {
  if (!AwaitTurn(ticket, deadline)) {
    // The earlier writes are still on their way: this one cannot overtake them.
    PassTurn(ticket);  // (they will fail or finish; the slot goes on after them)
    return absl::DeadlineExceededError(absl::StrCat(
        "the write to replicated slot ", ticket.slot,
        " waited past its deadline for the slot's earlier writes to reach the replicas"));
  }
  std::vector<std::string> replicas;
  {
    absl::MutexLock lock(&mu_);
    replicas = replicas_;
  }
  const std::string prefixed = EncodeReplicaOrder(
      ReplicaOrder{.slot = ticket.slot, .incarnation = incarnation_, .seq = ticket.seq}, args);
  absl::Status status;
  for (const std::string& replica : replicas) {
    absl::StatusOr<std::string> applied = peers_->Replicate(replica, function, prefixed, deadline);
    if (!applied.ok() && absl::IsFailedPrecondition(applied.status()) &&
        absl::StrContains(applied.status().message(), kMissedWrites)) {
      absl::MutexLock lock(&mu_);
      AddFill(replica, {ticket.slot});
    }
    if (!applied.ok() && TimeToWarn()) {
      ARDMA_LOG(kWarning, "replica %s did not apply write #%d of slot %d: %s (at most one such "
                          "warning a second)", replica, ticket.seq, ticket.slot,
                applied.status().ToString());
    }
    if (!applied.ok() && status.ok()) {
      status = absl::UnavailableError(absl::StrCat(
          "the write to slot ", ticket.slot, " was made on its primary but not acknowledged: "
          "replica ", replica, " did not apply it: ", applied.status().message()));
    }
  }
  PassTurn(ticket);
  return status;
}

absl::StatusOr<bool> SlotReplication::Admit(const ReplicaOrder& order) {
  absl::MutexLock lock(&mu_);
  if (!replica_of_[order.slot]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this member is not a replica of slot ", order.slot,
        " (any more: the slot map changed); the write was not applied here"));
  }
  const Mark& last = applied_[order.slot];
  if (last.incarnation == order.incarnation) {
    if (order.seq <= last.seq) return false;
    if (order.seq == last.seq + 1) return true;
  }
  // (An order this replica has no base in — a primary new to it, restarted or promoted — is
  // taken only after a fill: the primary's copy may hold keys no write of that order made.)
  return absl::FailedPreconditionError(absl::StrCat(
      "this replica of slot ", order.slot, " ", kMissedWrites, " (it applied #", last.seq,
      last.incarnation == order.incarnation
          ? ""
          : (last.incarnation == 0 ? " and has no base" : " of another primary's order"),
      ", and was sent #", order.seq, "): it must be filled again before it takes the slot's "
      "writes"));
}

void SlotReplication::Applied(const ReplicaOrder& order) {
  absl::MutexLock lock(&mu_);
  Mark& last = applied_[order.slot];
  if (last.incarnation != order.incarnation || last.seq < order.seq) {
    last = {order.incarnation, order.seq};
  }
}

void SlotReplication::SetBase(const ReplicaOrder& order) {
  absl::MutexLock lock(&mu_);
  applied_[order.slot] = {order.incarnation, order.seq};
}

}  // namespace ardma
