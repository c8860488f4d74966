#include "core/active/local_context.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/slots.h"
#include "core/status_macros.h"

namespace ardma {

absl::StatusOr<std::string> LocalContext::Run(Execution* execution, const BoundFunction& fn,
                                              std::string_view args) {
  LocalContext ctx(execution);
  ctx.caller_ = &fn;
  return fn.Run(ctx, args);
}

absl::Status LocalContext::SlowTick(size_t accesses) {
  if (ex_->access_cost > absl::ZeroDuration()) {
    absl::Time until = absl::Now() + ex_->access_cost * static_cast<int64_t>(accesses);
    while (absl::Now() < until) {
    }
    if (++ops_ % kDeadlineCheckInterval != 0) return absl::OkStatus();
  }
  if (ex_->cancelled != nullptr && ex_->cancelled->load(std::memory_order_relaxed)) {
    return absl::CancelledError("server is shutting down");
  }
  if (absl::Now() > ex_->deadline) {
    return absl::DeadlineExceededError("active function ran past its deadline");
  }
  return absl::OkStatus();
}

absl::Status LocalContext::DoReadBatch(std::span<const ReadOp> ops) {
  ARDMA_RETURN_IF_ERROR(Tick(ops.size()));
  for (const ReadOp& op : ops) {
    ARDMA_ASSIGN_OR_RETURN(RegionRef region, ex_->regions->Get(op.region));
    ARDMA_RETURN_IF_ERROR(region->Read(op.addr, op.out));
    ++ex_->counts.reads;
    ex_->counts.bytes_read += op.out.size();
  }
  return absl::OkStatus();
}

absl::Status LocalContext::DoWriteBatch(std::span<const WriteOp> ops) {
  ARDMA_RETURN_IF_ERROR(Tick(ops.size()));
  // Validate the whole batch first, as the wire op does.
  for (const WriteOp& op : ops) {
    ARDMA_ASSIGN_OR_RETURN(RegionRef region, ex_->regions->Get(op.region));
    ARDMA_RETURN_IF_ERROR(region->CheckWritable(op.addr, op.data.size()));
  }
  for (const WriteOp& op : ops) {
    ARDMA_ASSIGN_OR_RETURN(RegionRef region, ex_->regions->Get(op.region));
    ARDMA_RETURN_IF_ERROR(region->Write(op.addr, op.data));
    ++ex_->counts.writes;
    ex_->counts.bytes_written += op.data.size();
  }
  return absl::OkStatus();
}

absl::StatusOr<CasResult> LocalContext::DoCompareAndSwap(RegionId region_id, uint64_t addr,
                                                         uint64_t expected, uint64_t desired) {
  ARDMA_RETURN_IF_ERROR(Tick());
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, ex_->regions->Get(region_id));
  ++ex_->counts.cas;
  return region->CompareAndSwap(addr, expected, desired);
}

absl::StatusOr<uint64_t> LocalContext::DoFetchAdd(RegionId region_id, uint64_t addr,
                                                  uint64_t delta) {
  ARDMA_RETURN_IF_ERROR(Tick());
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, ex_->regions->Get(region_id));
  ++ex_->counts.fetch_adds;
  return region->FetchAdd(addr, delta);
}

absl::StatusOr<std::string_view> LocalContext::DoView(RegionId region_id, uint64_t addr,
                                                      uint64_t len) {
  ARDMA_RETURN_IF_ERROR(Tick());
  ARDMA_ASSIGN_OR_RETURN(RegionRef region, ex_->regions->Get(region_id));
  ++ex_->counts.reads;
  ex_->counts.bytes_read += len;
  ARDMA_ASSIGN_OR_RETURN(std::string_view view, region->View(addr, len));
  // A registered region may be removed while the view is in use: keep it mapped until the
  // function returns.
  if (region.shared() != nullptr) ex_->pinned.push_back(region.shared());
  return view;
}

absl::StatusOr<std::string> LocalContext::DoCall(std::string_view function, std::string_view args) {
  ARDMA_RETURN_IF_ERROR(Tick());
  if (ex_->depth >= kMaxCallDepth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("active calls nested deeper than ", kMaxCallDepth));
  }
  // The caller's code calls what it was built against (docs/SECURITY.md). In an isolated
  // worker, anything else is what the server resolves the name to now.
  absl::StatusOr<BoundFunction> resolved = caller_ == nullptr ? ex_->registry->Resolve(function)
                                           : ex_->link == nullptr
                                               ? ex_->registry->ResolveFrom(*caller_, function)
                                               : ex_->registry->ResolveWithin(*caller_, function);
  if (!resolved.ok() && absl::IsNotFound(resolved.status()) && ex_->link != nullptr) {
    std::optional<CodeHash> run_here;
    absl::StatusOr<std::string> result = ex_->link->Call(function, args, &run_here);
    if (!run_here.has_value()) {  // the server ran it (code only the server has)
      ++ex_->counts.calls;
      return result;
    }
    resolved = ex_->registry->Resolve(*run_here, function);  // loaded here just now
  }
  ARDMA_ASSIGN_OR_RETURN(BoundFunction fn, std::move(resolved));
  ++ex_->counts.calls;
  ++ex_->depth;
  absl::StatusOr<std::string> result = Run(ex_, fn, args);
  --ex_->depth;
  return result;
}

absl::Status LocalContext::DoPark(std::string_view key, const ParkOptions& options) {
  if (ex_->link != nullptr) {
    if (ex_->parked_by_link) return absl::FailedPreconditionError("request is already parked");
    ARDMA_RETURN_IF_ERROR(ex_->link->Park(key, options));
    ex_->parked_by_link = true;
    return absl::OkStatus();
  }
  if (ex_->parking == nullptr || ex_->responder == nullptr || *ex_->responder == nullptr) {
    return absl::FailedPreconditionError("this request cannot park");
  }
  if (ex_->parked != nullptr) return absl::FailedPreconditionError("request is already parked");
  ParkingLot::ResumeFn resume;
  if (options.resumable) {
    if (ex_->host == nullptr) {
      return absl::FailedPreconditionError("this request cannot park resumably");
    }
    resume = ex_->host->MakeResume(std::string(options.resume_args));
  }
  ex_->parked =
      ex_->parking->Park(key, *ex_->responder, ex_->deadline, std::move(resume), options.resume_at);
  return absl::OkStatus();
}

absl::StatusOr<bool> LocalContext::DoResume(std::string_view key) {
  if (ex_->link != nullptr) return ex_->link->Resume(key);
  if (ex_->parking == nullptr) return absl::FailedPreconditionError("no parking lot");
  return ex_->parking->Resume(key);
}

absl::Status LocalContext::DoOnClose(std::string_view key, std::string_view function,
                                     std::string_view args) {
  if (ex_->link != nullptr) return ex_->link->OnClose(key, function, args);
  if (ex_->host == nullptr) {
    return absl::FailedPreconditionError("this request has no connection to watch");
  }
  return ex_->host->OnClose(key, function, args);
}

absl::StatusOr<bool> LocalContext::DoWake(std::string_view key, std::string_view result) {
  if (ex_->link != nullptr) return ex_->link->Wake(key, result);
  if (ex_->parking == nullptr) return absl::FailedPreconditionError("no parking lot");
  return ex_->parking->Wake(key, result);
}

absl::Status LocalContext::DoBackoff(absl::Duration delay) {
  if (ex_->parked != nullptr || ex_->parked_by_link) {
    return absl::FailedPreconditionError("a parked request cannot back off: it waits already");
  }
  if (!ex_->may_block) {
    ex_->rescheduled = true;
    return RescheduledError();
  }
  if (ex_->cancelled != nullptr && ex_->cancelled->load(std::memory_order_relaxed)) {
    return absl::CancelledError("server is shutting down");
  }
  absl::Time now = absl::Now();
  if (now + delay > ex_->deadline) {
    return absl::DeadlineExceededError("active function would wait past its deadline");
  }
  absl::SleepFor(delay);
  return absl::OkStatus();
}

absl::StatusOr<std::string> LocalContext::DoCallPeer(const PeerTarget& target,
                                                     std::string_view function,
                                                     std::string_view args) {
  ARDMA_RETURN_IF_ERROR(Tick());
  if (ex_->link != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot call ", std::string(function),
                     " on a peer from isolated code (ardmad --isolate): not yet"));
  }
  if (ex_->peers == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot call ", std::string(function),
                     " on a peer: this server is not a member of a cluster (ardmad --cluster)"));
  }
  if (ex_->parked != nullptr) {
    return absl::FailedPreconditionError("a parked request cannot call a peer: it waits already");
  }
  if (!ex_->may_block) {
    ex_->rescheduled = true;
    return RescheduledError();
  }
  if (absl::Now() >= ex_->deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat("no time left to call ", std::string(function), " on a peer"));
  }
  ++ex_->counts.peer_calls;
  return ex_->peers->Call(target, function, args, ex_->deadline);
}

absl::Status LocalContext::DoCheckSlot(uint32_t slot, uint64_t word, uint64_t owner_word,
                                       bool write, bool replicable) {
  if (ex_->replica_apply) return absl::OkStatus();  // the primary's check passed
  if (!write && ex_->stale_read && ex_->replication != nullptr &&
      ex_->replication->Replicates(slot)) {
    return absl::OkStatus();
  }
  ARDMA_RETURN_IF_ERROR(slots::CheckFence(slot, word, owner_word, write));
  if (!slots::Replicated(word, owner_word)) return absl::OkStatus();
  if (!write) {
    if (ex_->replication != nullptr && ex_->replication->Fenced()) {
      return absl::UnavailableError(absl::StrCat(
          "this member is fenced: it could not renew its cluster membership in time, so another "
          "member may be the primary of slot ", slot, " by now; ask the slot map again"));
    }
    return absl::OkStatus();
  }
  if (ex_->ticket.has_value()) {
    if (ex_->ticket->slot == slot) return absl::OkStatus();  // checked again (a retry)
    return absl::FailedPreconditionError(absl::StrCat(
        "a call writes replicated slots ", ex_->ticket->slot, " and ", slot,
        ": one call may write one replicated slot"));
  }
  if (!replicable || ex_->replication == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "slot ", slot, " is replicated, and ",
        ex_->replication == nullptr ? "code run isolated (ardmad --isolate) cannot forward its "
                                      "writes to the replicas yet"
                                    : "this service does not replicate its writes yet",
        ": the write is refused rather than left on the primary alone"));
  }
  if (ex_->parked != nullptr || ex_->parked_by_link) {
    return absl::FailedPreconditionError("a parked request cannot write a replicated slot");
  }
  ex_->replicates = true;
  if (!ex_->may_block) {  // forwarding waits for the replicas: not on an I/O thread
    ex_->rescheduled = true;
    return RescheduledError();
  }
  ARDMA_ASSIGN_OR_RETURN(Replication::Ticket ticket, ex_->replication->Order(slot));
  ex_->ticket = ticket;
  return absl::OkStatus();
}

}  // namespace ardma
