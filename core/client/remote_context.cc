#include "core/client/remote_context.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

constexpr int kMaxCallDepth = 32;  // as on the server

}  // namespace

absl::Status RemoteContext::DoReadBatch(std::span<const ReadOp> ops) {
  return client_->ReadInto(ops, options_);
}

absl::Status RemoteContext::DoWriteBatch(std::span<const WriteOp> ops) {
  if (ops.empty()) return absl::OkStatus();
  if (ops.size() == 1) return client_->Write(ops[0].addr, ops[0].data, ops[0].region, options_);
  class Batch batch = client_->Batch();
  for (const WriteOp& op : ops) batch.Write(op.addr, op.data, op.region);
  return batch.Send(options_).status();
}

absl::StatusOr<CasResult> RemoteContext::DoCompareAndSwap(RegionId region, uint64_t addr,
                                                          uint64_t expected, uint64_t desired) {
  return client_->CompareAndSwap(addr, expected, desired, region, options_);
}

absl::StatusOr<uint64_t> RemoteContext::DoFetchAdd(RegionId region, uint64_t addr, uint64_t delta) {
  return client_->FetchAdd(addr, delta, region, options_);
}

absl::StatusOr<std::string_view> RemoteContext::DoView(RegionId, uint64_t, uint64_t) {
  return absl::FailedPreconditionError("View needs server-local memory (active mode); use Read");
}

absl::StatusOr<std::string> RemoteContext::DoCall(std::string_view function,
                                                  std::string_view args) {
  if (depth_ >= kMaxCallDepth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("active calls nested deeper than ", kMaxCallDepth));
  }
  for (const ActiveLibrary* library : libraries_) {
    if (ActiveFunction fn = library->Find(function)) {
      ++depth_;
      absl::StatusOr<std::string> result = fn(*this, args);
      --depth_;
      return result;
    }
  }
  return absl::NotFoundError(absl::StrCat("no linked library exports '", ToAbsl(function), "'"));
}

absl::Status RemoteContext::DoPark(std::string_view, const ParkOptions&) {
  return absl::FailedPreconditionError("Park needs active mode");
}

absl::StatusOr<bool> RemoteContext::DoResume(std::string_view) {
  return absl::FailedPreconditionError("Resume needs active mode");
}

absl::Status RemoteContext::DoOnClose(std::string_view, std::string_view, std::string_view) {
  return absl::FailedPreconditionError("OnClose needs active mode");
}

absl::StatusOr<bool> RemoteContext::DoWake(std::string_view, std::string_view) {
  return absl::FailedPreconditionError("Wake needs active mode");
}

absl::Status RemoteContext::DoBackoff(absl::Duration delay) {
  absl::Time deadline = deadline_.Get();
  absl::Time now = FastNow();
  if (now >= deadline) {
    return absl::DeadlineExceededError("the operation's deadline passed while it waited");
  }
  absl::SleepFor(std::min(delay, deadline - now));
  return absl::OkStatus();
}

}  // namespace ardma
