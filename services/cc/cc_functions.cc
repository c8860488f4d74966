// The "cc" active-code library: the compile farm's job queue (cc_queue.h).
//
//   cc.submit   id:u64 Bytes32 descriptor        -> the slave's result (parks until finished)
//   cc.take     Str16 slave                      -> id:u64 Bytes32 descriptor (parks until a job)
//   cc.finish   id:u64 Str16 slave failed:u8 Bytes32 result -> woke:u8
//   cc.requeue  id:u64 Str16 slave               (a slave's close hook: give the job back)
//   cc.cancel   id:u64                           (withdraw a job; a submitter's close hook)
//   cc.status                                    -> cc_queue.h EncodeStatus
#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/cc/cc_queue.h"

namespace ardma::cc::functions {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

absl::StatusOr<std::string> Submit(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t id;
  std::string_view descriptor;
  if (!r.U64(&id) || !r.Bytes32(&descriptor) || !r.AtEnd()) {
    return absl::InvalidArgumentError("cc.submit: bad arguments");
  }
  ARDMA_RETURN_IF_ERROR(cc::Submit(ctx, id, descriptor));
  return std::string();  // parked: the answer is the finish's result
}

absl::StatusOr<std::string> Take(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view slave;
  if (!r.Str16(&slave) || !r.AtEnd()) return absl::InvalidArgumentError("cc.take: bad arguments");
  ARDMA_ASSIGN_OR_RETURN(std::optional<Job> job, cc::Take(ctx, slave, args));
  if (!job.has_value()) return std::string();  // parked
  std::string out;
  ByteWriter w(&out);
  w.U64(job->id);
  w.Bytes32(job->descriptor);
  return out;
}

absl::StatusOr<std::string> Finish(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t id;
  std::string_view slave, result;
  uint8_t failed;
  if (!r.U64(&id) || !r.Str16(&slave) || !r.U8(&failed) || !r.Bytes32(&result) || !r.AtEnd()) {
    return absl::InvalidArgumentError("cc.finish: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(bool woke, cc::Finish(ctx, id, slave, failed != 0, result));
  return std::string(1, woke ? '\1' : '\0');
}

absl::StatusOr<std::string> Requeue(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t id;
  std::string_view slave;
  if (!r.U64(&id) || !r.Str16(&slave) || !r.AtEnd()) {
    return absl::InvalidArgumentError("cc.requeue: bad arguments");
  }
  ARDMA_RETURN_IF_ERROR(cc::Requeue(ctx, id, slave));
  return std::string();
}

absl::StatusOr<std::string> Cancel(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t id;
  if (!r.U64(&id) || !r.AtEnd()) return absl::InvalidArgumentError("cc.cancel: bad arguments");
  ARDMA_RETURN_IF_ERROR(cc::Cancel(ctx, id));
  return std::string();
}

absl::StatusOr<std::string> Status(Context& ctx, std::string_view args) {
  if (!args.empty()) return absl::InvalidArgumentError("cc.status takes no arguments");
  ARDMA_ASSIGN_OR_RETURN(FarmStatus st, cc::Status(ctx));
  return EncodeStatus(st);
}

}  // namespace
}  // namespace ardma::cc::functions

ARDMA_ACTIVE_LIBRARY(cc, {"cc.submit", &ardma::cc::functions::Submit},
                     {"cc.take", &ardma::cc::functions::Take},
                     {"cc.finish", &ardma::cc::functions::Finish},
                     {"cc.requeue", &ardma::cc::functions::Requeue},
                     {"cc.cancel", &ardma::cc::functions::Cancel},
                     {"cc.status", &ardma::cc::functions::Status});
