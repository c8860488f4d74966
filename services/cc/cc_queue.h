// The compile farm's job queue (the rdistcc paper's rdistcc, slave-driven): an FCFS queue of opaque job
// descriptors in the heap, written once against Context. Submitters park until a slave finishes
// their job; slaves park until there is a job. Each side's leases are tied to its connection
// (Context::OnClose): a slave that goes away gives its jobs back, a submitter that goes away
// withdraws its job. The active-code library "cc" (cc_functions.cc) exposes it; CcClient is the
// typed client.
//
// Parking and close hooks exist on the server only, so every function here needs active mode
// (FAILED_PRECONDITION elsewhere): the data a job moves (source, object) goes one-sidedly through
// registered regions, the control plane is one EXECUTE per step.
//
// Layout (the block of the root "cc.farm"):
//   +0 lock word   +8 next sequence   +16..+56 counters (submitted, finished, requeued, cancelled,
//   rejected, failed)   +64 kMaxSlaves slave rows of 64 bytes (name[40], running, done, seen_us)
//   then kSlots job slots of 64 bytes (state, id, seq, desc addr, desc len, slave+1, submitted_us,
//   started_us).
#ifndef ARDMA_SERVICES_CC_CC_QUEUE_H_
#define ARDMA_SERVICES_CC_CC_QUEUE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/context/context.h"

namespace ardma::cc {

inline constexpr uint32_t kSlots = 1024;    // jobs queued or running at once
inline constexpr uint32_t kMaxSlaves = 64;  // slaves the status table tracks by name
inline constexpr size_t kMaxSlaveName = 39;
inline constexpr size_t kMaxDescriptor = 64 << 10;

// A job handed to a slave.
struct Job {
  uint64_t id = 0;
  std::string descriptor;
};

// What `ardma cc status` shows.
struct SlaveRow {
  std::string name;
  uint64_t running = 0, done = 0;
  uint64_t seen_us = 0;  // last take or finish (Unix time)
};
struct RunningJob {
  uint64_t id = 0;
  std::string slave;  // empty while queued
  uint64_t submitted_us = 0, started_us = 0;
};
struct FarmStatus {
  uint64_t submitted = 0, finished = 0, requeued = 0, cancelled = 0, rejected = 0, failed = 0;
  uint64_t queued = 0, running = 0;
  std::vector<SlaveRow> slaves;
  std::vector<RunningJob> jobs;  // queued and running, oldest first
};

// Queues `descriptor` as job `id` (the submitter's random number) and parks the request until a
// slave finishes it: the finish's result becomes the answer. RESOURCE_EXHAUSTED when the queue is
// full, ALREADY_EXISTS for an id in use.
absl::Status Submit(Context& ctx, uint64_t id, std::string_view descriptor);
// The oldest queued job for slave `slave`, or nullopt when the request parked until one comes.
absl::StatusOr<std::optional<Job>> Take(Context& ctx, std::string_view slave,
                                        std::string_view resume_args);
// Completes job `id` (taken by `slave`) with `result` for its submitter. `failed`: the slave could
// not run it (the submitter builds locally). Returns whether a submitter was still waiting.
// NOT_FOUND if the job is no longer this slave's (cancelled, or given back).
absl::StatusOr<bool> Finish(Context& ctx, uint64_t id, std::string_view slave, bool failed,
                            std::string_view result);
// Gives job `id` back to the queue if `slave` still runs it (the slave's close hook).
absl::Status Requeue(Context& ctx, uint64_t id, std::string_view slave);
// Withdraws job `id` wherever it is (the submitter's close hook, or a submitter that gave up).
absl::Status Cancel(Context& ctx, uint64_t id);
absl::StatusOr<FarmStatus> Status(Context& ctx);

std::string EncodeStatus(const FarmStatus& status);
absl::StatusOr<FarmStatus> DecodeStatus(std::string_view bytes);

}  // namespace ardma::cc

#endif  // ARDMA_SERVICES_CC_CC_QUEUE_H_
