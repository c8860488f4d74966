#include "services/cc/cc_queue.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/lock_word.h"

namespace ardma::cc {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

constexpr std::string_view kRoot = "cc.farm";
constexpr std::string_view kWorkKey = "cc.work";  // slaves park here

// Offsets in the farm block.
constexpr uint64_t kLock = 0, kNextSeq = 8, kCounters = 16;
enum Counter { kSubmitted, kFinished, kRequeued, kCancelled, kRejected, kFailed, kNumCounters };
constexpr uint64_t kSlaveRows = 64, kRowSize = 64;
constexpr uint64_t kSlotsAt = kSlaveRows + kMaxSlaves * kRowSize, kSlotSize = 64;
constexpr uint64_t kBlockSize = kSlotsAt + kSlots * kSlotSize;
static_assert(kCounters + kNumCounters * 8 <= kSlaveRows);

enum SlotState : uint64_t { kFree = 0, kQueued = 1, kRunning = 2 };
struct Slot {
  uint64_t state, id, seq, desc_addr, desc_len, slave, submitted_us, started_us;
};
static_assert(sizeof(Slot) == kSlotSize);
struct SlaveRowData {
  char name[40];
  uint64_t running, done, seen_us;
};
static_assert(sizeof(SlaveRowData) == kRowSize);

std::string JobKey(uint64_t id) { return absl::StrCat("cc.job/", id); }
std::string SubmitterHook(uint64_t id) { return absl::StrCat("cc.sub/", id); }
std::string SlaveHook(uint64_t id) { return absl::StrCat("cc.run/", id); }

std::string U64Bytes(uint64_t v) {
  std::string out;
  ByteWriter(&out).U64(v);
  return out;
}

uint64_t NowUs() { return static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())); }

absl::Status NeedsServer(Context& ctx) {
  if (ctx.IsLocal()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "the compile farm's queue parks requests and ties leases to connections: active mode only");
}

absl::StatusOr<uint64_t> Farm(Context& ctx) {
  absl::StatusOr<uint64_t> root = heap::GetRoot(ctx, kRoot);
  if (root.ok() || root.status().code() != absl::StatusCode::kNotFound) return root;
  ARDMA_ASSIGN_OR_RETURN(uint64_t mine, heap::Allocate(ctx, kBlockSize));
  absl::Status zeroed = ctx.Write(mine, std::string(kBlockSize, '\0'));
  absl::StatusOr<uint64_t> farm =
      zeroed.ok() ? heap::GetOrCreateRoot(ctx, kRoot, mine) : absl::StatusOr<uint64_t>(zeroed);
  if (!farm.ok() || *farm != mine) heap::Free(ctx, mine).IgnoreError();
  return farm;
}

// The whole block under its lock word: read into memory, changed, the changed parts written back.
class Locked {
 public:
  static absl::StatusOr<Locked> Take(Context& ctx) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t farm, Farm(ctx));
    ARDMA_ASSIGN_OR_RETURN(uint64_t nonce, AcquireLockWord(ctx, farm + kLock, "cc"));
    Locked l(ctx, farm, nonce);
    absl::Status read = ctx.Read(farm, std::span<char>(l.bytes_.data(), l.bytes_.size()));
    if (!read.ok()) {
      ReleaseLockWord(ctx, farm + kLock, nonce, "cc").IgnoreError();
      return read;
    }
    return l;
  }

  Slot* slot(uint32_t i) { return reinterpret_cast<Slot*>(bytes_.data() + kSlotsAt) + i; }
  SlaveRowData* row(uint32_t i) {
    return reinterpret_cast<SlaveRowData*>(bytes_.data() + kSlaveRows) + i;
  }
  uint64_t& counter(Counter c) {
    return *reinterpret_cast<uint64_t*>(bytes_.data() + kCounters + 8 * c);
  }
  uint64_t& next_seq() { return *reinterpret_cast<uint64_t*>(bytes_.data() + kNextSeq); }

  // The slot holding job `id`, or -1.
  int Find(uint64_t id) {
    for (uint32_t i = 0; i < kSlots; ++i) {
      if (slot(i)->state != kFree && slot(i)->id == id) return static_cast<int>(i);
    }
    return -1;
  }
  // The row of slave `name` (made if new; the least recently seen idle row is reused).
  uint32_t Row(std::string_view name) {
    name = name.substr(0, kMaxSlaveName);
    int reuse = -1;
    for (uint32_t i = 0; i < kMaxSlaves; ++i) {
      SlaveRowData* r = row(i);
      if (std::string_view(r->name, strnlen(r->name, sizeof(r->name))) == name) return i;
      if (r->running == 0 && (reuse < 0 || r->seen_us < row(reuse)->seen_us)) {
        reuse = static_cast<int>(i);
      }
    }
    uint32_t i = reuse < 0 ? 0 : static_cast<uint32_t>(reuse);
    std::memset(row(i), 0, kRowSize);
    std::memcpy(row(i)->name, name.data(), name.size());
    return i;
  }

  // Writes the block back (it is small: one copy on the server) and releases the lock.
  absl::Status Commit() {
    ARDMA_RETURN_IF_ERROR(
        ctx_.Write(farm_ + 8, std::string_view(bytes_.data() + 8, bytes_.size() - 8)));
    return Release();
  }
  absl::Status Release() { return ReleaseLockWord(ctx_, farm_ + kLock, nonce_, "cc"); }

 private:
  Locked(Context& ctx, uint64_t farm, uint64_t nonce)
      : ctx_(ctx), farm_(farm), nonce_(nonce), bytes_(kBlockSize, '\0') {}
  Context& ctx_;
  uint64_t farm_, nonce_;
  std::string bytes_;
};

absl::StatusOr<std::string> ReadDescriptor(Context& ctx, const Slot& s) {
  return ctx.Read(s.desc_addr, s.desc_len);
}

}  // namespace

absl::Status Submit(Context& ctx, uint64_t id, std::string_view descriptor) {
  ARDMA_RETURN_IF_ERROR(NeedsServer(ctx));
  if (descriptor.empty() || descriptor.size() > kMaxDescriptor) {
    return absl::InvalidArgumentError(absl::StrCat("cc.submit: a descriptor of ", descriptor.size(),
                                                   " bytes (1 to ", kMaxDescriptor, ")"));
  }
  // Everything that may wait (the lock word) comes before the park: a request that parked must
  // not be rescheduled (Context::Backoff on an I/O thread).
  ARDMA_ASSIGN_OR_RETURN(uint64_t desc, heap::Allocate(ctx, descriptor.size()));
  absl::Status written = ctx.Write(desc, descriptor);
  absl::StatusOr<Locked> l = written.ok() ? Locked::Take(ctx) : absl::StatusOr<Locked>(written);
  if (!l.ok()) {
    heap::Free(ctx, desc).IgnoreError();
    return l.status();
  }
  absl::Status refused;
  int free_slot = -1;
  for (uint32_t i = 0; i < kSlots && free_slot < 0; ++i) {
    if (l->slot(i)->state == kFree) free_slot = static_cast<int>(i);
  }
  if (l->Find(id) >= 0) {
    refused = absl::AlreadyExistsError(absl::StrCat("cc.submit: job ", id, " exists"));
  } else if (free_slot < 0) {
    ++l->counter(kRejected);
    refused =
        absl::ResourceExhaustedError(absl::StrCat("the farm's queue is full (", kSlots, " jobs)"));
  }
  // Parked while the lock is held: no slave can see the job, let alone finish it, before the
  // submitter waits for the result.
  if (refused.ok()) refused = ctx.Park(JobKey(id));
  if (!refused.ok()) {
    (refused.code() == absl::StatusCode::kResourceExhausted ? l->Commit() : l->Release())
        .IgnoreError();
    heap::Free(ctx, desc).IgnoreError();
    return refused;
  }
  *l->slot(free_slot) = Slot{kQueued, id, l->next_seq()++, desc, descriptor.size(), 0, NowUs(), 0};
  ++l->counter(kSubmitted);
  ARDMA_RETURN_IF_ERROR(l->Commit());
  // Withdrawn if the submitter goes away; then a parked slave (if any) gets to look.
  ARDMA_RETURN_IF_ERROR(ctx.OnClose(SubmitterHook(id), "cc.cancel", U64Bytes(id)));
  return ctx.Resume(kWorkKey).status();
}

absl::StatusOr<std::optional<Job>> Take(Context& ctx, std::string_view slave,
                                        std::string_view resume_args) {
  ARDMA_RETURN_IF_ERROR(NeedsServer(ctx));
  if (slave.empty() || slave.size() > kMaxSlaveName) {
    return absl::InvalidArgumentError("cc.take: a slave name of 1 to 39 bytes");
  }
  ARDMA_ASSIGN_OR_RETURN(Locked l, Locked::Take(ctx));
  int oldest = -1;
  for (uint32_t i = 0; i < kSlots; ++i) {
    if (l.slot(i)->state == kQueued && (oldest < 0 || l.slot(i)->seq < l.slot(oldest)->seq)) {
      oldest = static_cast<int>(i);
    }
  }
  uint32_t row = l.Row(slave);
  l.row(row)->seen_us = NowUs();
  if (oldest < 0) {
    // Parked (resumable) while the lock is held, so the next submit, which queues under the lock
    // and then resumes a parked slave, cannot miss this one. The resumed run starts over.
    absl::Status parked = ctx.Park(kWorkKey, {.resumable = true, .resume_args = resume_args});
    absl::Status committed = l.Commit();
    if (!parked.ok()) return parked;
    ARDMA_RETURN_IF_ERROR(committed);
    return std::optional<Job>();
  }
  Slot* s = l.slot(oldest);
  s->state = kRunning;
  s->slave = row + 1;
  s->started_us = NowUs();
  ++l.row(row)->running;
  Job job{s->id, ""};
  absl::StatusOr<std::string> desc = ReadDescriptor(ctx, *s);
  if (!desc.ok()) {
    l.Release().IgnoreError();
    return desc.status();
  }
  job.descriptor = *std::move(desc);
  ARDMA_RETURN_IF_ERROR(l.Commit());
  std::string hook_args;
  ByteWriter w(&hook_args);
  w.U64(job.id);
  w.Str16(slave);
  ARDMA_RETURN_IF_ERROR(ctx.OnClose(SlaveHook(job.id), "cc.requeue", hook_args));
  return std::optional<Job>(std::move(job));
}

absl::StatusOr<bool> Finish(Context& ctx, uint64_t id, std::string_view slave, bool failed,
                            std::string_view result) {
  ARDMA_RETURN_IF_ERROR(NeedsServer(ctx));
  ARDMA_ASSIGN_OR_RETURN(Locked l, Locked::Take(ctx));
  int i = l.Find(id);
  uint32_t row = l.Row(slave);
  if (i < 0 || l.slot(i)->state != kRunning || l.slot(i)->slave != row + 1) {
    ARDMA_RETURN_IF_ERROR(l.Release());
    return absl::NotFoundError(
        absl::StrCat("cc.finish: job ", id, " is not ", std::string(slave), "'s"));
  }
  Slot s = *l.slot(i);
  *l.slot(i) = Slot{};
  --l.row(row)->running;
  ++l.row(row)->done;
  l.row(row)->seen_us = NowUs();
  ++l.counter(failed ? kFailed : kFinished);
  ARDMA_RETURN_IF_ERROR(l.Commit());
  heap::Free(ctx, s.desc_addr).IgnoreError();
  ARDMA_RETURN_IF_ERROR(ctx.OnClose(SlaveHook(id), "", ""));
  return ctx.Wake(JobKey(id), result);
}

absl::Status Requeue(Context& ctx, uint64_t id, std::string_view slave) {
  ARDMA_RETURN_IF_ERROR(NeedsServer(ctx));
  ARDMA_ASSIGN_OR_RETURN(Locked l, Locked::Take(ctx));
  int i = l.Find(id);
  uint32_t row = l.Row(slave);
  if (i < 0 || l.slot(i)->state != kRunning || l.slot(i)->slave != row + 1) return l.Release();
  Slot* s = l.slot(i);
  s->state = kQueued;
  s->slave = 0;
  s->started_us = 0;
  --l.row(row)->running;
  ++l.counter(kRequeued);
  ARDMA_RETURN_IF_ERROR(l.Commit());
  return ctx.Resume(kWorkKey).status();
}

absl::Status Cancel(Context& ctx, uint64_t id) {
  ARDMA_RETURN_IF_ERROR(NeedsServer(ctx));
  ARDMA_ASSIGN_OR_RETURN(Locked l, Locked::Take(ctx));
  int i = l.Find(id);
  if (i < 0) return l.Release();
  Slot s = *l.slot(i);
  if (s.state == kRunning && s.slave > 0) --l.row(static_cast<uint32_t>(s.slave - 1))->running;
  *l.slot(i) = Slot{};
  ++l.counter(kCancelled);
  ARDMA_RETURN_IF_ERROR(l.Commit());
  heap::Free(ctx, s.desc_addr).IgnoreError();
  // A submitter still parked (it cancels on its own connection's close, or gave up) is answered.
  return ctx.Wake(JobKey(id), "").status();
}

absl::StatusOr<FarmStatus> Status(Context& ctx) {
  ARDMA_ASSIGN_OR_RETURN(Locked l, Locked::Take(ctx));
  FarmStatus st;
  st.submitted = l.counter(kSubmitted);
  st.finished = l.counter(kFinished);
  st.requeued = l.counter(kRequeued);
  st.cancelled = l.counter(kCancelled);
  st.rejected = l.counter(kRejected);
  st.failed = l.counter(kFailed);
  std::vector<std::pair<uint64_t, RunningJob>> jobs;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Slot* s = l.slot(i);
    if (s->state == kFree) continue;
    (s->state == kQueued ? st.queued : st.running)++;
    RunningJob j{s->id, "", s->submitted_us, s->started_us};
    if (s->slave > 0 && s->slave <= kMaxSlaves) {
      const SlaveRowData* r = l.row(static_cast<uint32_t>(s->slave - 1));
      j.slave = std::string(r->name, strnlen(r->name, sizeof(r->name)));
    }
    jobs.emplace_back(s->seq, std::move(j));
  }
  std::sort(jobs.begin(), jobs.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [seq, j] : jobs) st.jobs.push_back(std::move(j));
  for (uint32_t i = 0; i < kMaxSlaves; ++i) {
    const SlaveRowData* r = l.row(i);
    if (r->name[0] == '\0') continue;
    st.slaves.push_back(
        {std::string(r->name, strnlen(r->name, sizeof(r->name))), r->running, r->done, r->seen_us});
  }
  ARDMA_RETURN_IF_ERROR(l.Release());
  return st;
}

std::string EncodeStatus(const FarmStatus& st) {
  std::string out;
  ByteWriter w(&out);
  for (uint64_t v : {st.submitted, st.finished, st.requeued, st.cancelled, st.rejected, st.failed,
                     st.queued, st.running}) {
    w.U64(v);
  }
  w.U32(static_cast<uint32_t>(st.slaves.size()));
  for (const SlaveRow& r : st.slaves) {
    w.Str16(r.name);
    w.U64(r.running);
    w.U64(r.done);
    w.U64(r.seen_us);
  }
  w.U32(static_cast<uint32_t>(st.jobs.size()));
  for (const RunningJob& j : st.jobs) {
    w.U64(j.id);
    w.Str16(j.slave);
    w.U64(j.submitted_us);
    w.U64(j.started_us);
  }
  return out;
}

absl::StatusOr<FarmStatus> DecodeStatus(std::string_view bytes) {
  ByteReader r(bytes);
  FarmStatus st;
  uint32_t n;
  auto bad = [] { return absl::DataLossError("cc.status: malformed answer"); };
  for (uint64_t* v : {&st.submitted, &st.finished, &st.requeued, &st.cancelled, &st.rejected,
                      &st.failed, &st.queued, &st.running}) {
    if (!r.U64(v)) return bad();
  }
  if (!r.U32(&n) || n > kMaxSlaves) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    SlaveRow row;
    std::string_view name;
    if (!r.Str16(&name) || !r.U64(&row.running) || !r.U64(&row.done) || !r.U64(&row.seen_us)) {
      return bad();
    }
    row.name = std::string(name);
    st.slaves.push_back(std::move(row));
  }
  if (!r.U32(&n) || n > kSlots) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    RunningJob j;
    std::string_view slave;
    if (!r.U64(&j.id) || !r.Str16(&slave) || !r.U64(&j.submitted_us) || !r.U64(&j.started_us)) {
      return bad();
    }
    j.slave = std::string(slave);
    st.jobs.push_back(std::move(j));
  }
  if (!r.AtEnd()) return bad();
  return st;
}

}  // namespace ardma::cc
