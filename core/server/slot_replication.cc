#include "core/server/slot_replication.h"

#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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

namespace {

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
      issued_(slots::kSlots, 0),
      sent_(slots::kSlots, 0),
      applied_(slots::kSlots) {}

void SlotReplication::SetRoles(std::vector<std::string> replicas, std::vector<bool> replica_of) {
  replica_of.resize(slots::kSlots, false);
  absl::MutexLock lock(&mu_);
  replicas_ = std::move(replicas);
  replica_of_ = std::move(replica_of);
}

void SlotReplication::SetWritableUntil(absl::Time until) {
  writable_until_ns_.store(absl::ToUnixNanos(until), std::memory_order_relaxed);
}

absl::StatusOr<Replication::Ticket> SlotReplication::Order(uint32_t slot) {
  if (slot >= slots::kSlots) return absl::InvalidArgumentError("no such slot");
  const absl::Time until =
      absl::FromUnixNanos(writable_until_ns_.load(std::memory_order_relaxed));
  if (absl::Now() >= until) {
    return absl::UnavailableError(absl::StrCat(
        "this member is fenced: it could not renew its cluster membership in time, so another "
        "member may be the primary of slot ", slot, " by now; the write was not made"));
  }
  absl::MutexLock lock(&mu_);
  if (replicas_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "slot ", slot, " is marked replicated here, but the slot map names no replica of this "
        "member"));
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
  const Mark& last = applied_[order.slot];
  if (last.incarnation == order.incarnation) {
    if (order.seq <= last.seq) return false;
    if (order.seq == last.seq + 1) return true;
  } else if (order.seq == 1) {
    return true;  // the primary's first write of the slot since it started
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "this replica of slot ", order.slot, " has missed writes (it applied #", last.seq,
      last.incarnation == order.incarnation ? "" : " of an earlier primary", ", and was sent #",
      order.seq, "): it must be filled again before it takes the slot's writes"));
}

void SlotReplication::Applied(const ReplicaOrder& order) {
  absl::MutexLock lock(&mu_);
  Mark& last = applied_[order.slot];
  if (last.incarnation != order.incarnation || last.seq < order.seq) {
    last = {order.incarnation, order.seq};
  }
}

}  // namespace ardma
