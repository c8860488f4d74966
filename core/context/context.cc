#include "core/context/context.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/cord.h"
#include "core/slots.h"

namespace ardma {

absl::Status Context::Read(uint64_t addr, std::span<char> out, RegionId region) {
  ReadOp op{addr, out, region};
  return DoReadBatch({&op, 1});
}

absl::StatusOr<std::string> Context::Read(uint64_t addr, size_t len, RegionId region) {
  std::string out(len, '\0');
  absl::Status s = Read(addr, std::span<char>(out.data(), out.size()), region);
  if (!s.ok()) return s;
  return out;
}

absl::Status Context::Write(uint64_t addr, std::string_view data, RegionId region) {
  WriteOp op{addr, data, region};
  return DoWriteBatch({&op, 1});
}

absl::StatusOr<uint64_t> Context::ReadU64(uint64_t addr, RegionId region) {
  uint64_t value;
  absl::Status s = Read(addr, std::span<char>(reinterpret_cast<char*>(&value), 8), region);
  if (!s.ok()) return s;
  return value;
}

absl::Status Context::WriteU64(uint64_t addr, uint64_t value, RegionId region) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);
  return Write(addr, std::string_view(bytes, 8), region);
}

absl::Duration Context::BackoffDelay(int round) {
  return absl::Microseconds(std::min(1 << std::clamp(round, 0, 10), 1000));
}

absl::Status Context::DoCheckSlot(uint32_t slot, uint64_t word, uint64_t owner_word, bool write,
                                  bool) {
  if (absl::Status s = slots::CheckFence(slot, word, owner_word, write); !s.ok()) return s;
  if (write && slots::Replicated(word, owner_word)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "slot ", slot, " is replicated: its writes go in active mode, where its primary forwards "
        "them to its replicas (a one-sided write would reach the primary's memory only)"));
  }
  return absl::OkStatus();
}

namespace {
constexpr char kRescheduledPayload[] = "ardma.rescheduled";
}  // namespace

absl::Status RescheduledError() {
  absl::Status status = absl::UnavailableError(
      "active function must wait: run it again on a worker thread (Context::Backoff)");
  status.SetPayload(kRescheduledPayload, absl::Cord("1"));
  return status;
}

bool IsRescheduled(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         status.GetPayload(kRescheduledPayload).has_value();
}

}  // namespace ardma
