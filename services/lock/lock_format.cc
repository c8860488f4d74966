#include "services/lock/lock_format.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/service_name.h"

namespace ardma::lock {

TicketView ViewTicket(Slot slot, uint64_t t) {
  if (slot.state() == SlotState::kUnused) return TicketView::kNotClaimed;
  // Distance from t to the slot's ticket, modulo 2^24: 0 is t itself; a later ticket means t was
  // released and its slot reused; an earlier one means t has not claimed it yet.
  uint64_t ahead = (slot.ticket() - t) & kTicketMask;
  if (ahead == 0) {
    return slot.state() == SlotState::kReleased ? TicketView::kReleased : TicketView::kLive;
  }
  return ahead < (kTicketMask + 1) / 2 ? TicketView::kReleased : TicketView::kNotClaimed;
}

absl::Status CheckLockName(std::string_view name) {
  return CheckServiceName(name, kMaxNameBytes, "lock");
}

absl::Status CheckLease(absl::Duration lease) {
  if (lease < kMinLease || lease > kMaxLease) {
    return absl::InvalidArgumentError(absl::StrCat("a lease is ", absl::FormatDuration(kMinLease),
                                                   " to ", absl::FormatDuration(kMaxLease),
                                                   ", not ", absl::FormatDuration(lease)));
  }
  return absl::OkStatus();
}

std::string WaiterKey(uint64_t addr, uint64_t t) { return absl::StrCat("lock:", addr, ":", t); }

std::string EncodeAcquireResult(const AcquireResult& r) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U8(r.granted ? 1 : 0);
  if (r.granted) {
    w.U64(r.addr);
    w.U64(r.ticket);
    w.U64(r.token);
    w.U64(r.word);
  } else {
    w.U8(r.kick ? 1 : 0);
  }
  return out;
}

absl::StatusOr<AcquireResult> DecodeAcquireResult(std::string_view bytes) {
  wire::ByteReader r(bytes);
  AcquireResult out;
  uint8_t granted = 0;
  if (!r.U8(&granted)) return absl::DataLossError("lock.acquire: empty result");
  out.granted = granted != 0;
  uint8_t kick = 0;
  if (!out.granted && !r.U8(&kick)) return absl::DataLossError("lock.acquire: short result");
  out.kick = kick != 0;
  if (out.granted && (!r.U64(&out.addr) || !r.U64(&out.ticket) || !r.U64(&out.token) ||
                       !r.U64(&out.word))) {
    return absl::DataLossError("lock.acquire: short result");
  }
  if (!r.AtEnd()) return absl::DataLossError("lock.acquire: trailing bytes");
  return out;
}

std::string EncodeAcquireArgs(const AcquireArgs& a) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U8(0);  // phase: first call
  w.Str16(a.name);
  w.U8(a.exclusive ? 1 : 0);
  w.U64(static_cast<uint64_t>(absl::ToInt64Microseconds(a.wait)));
  w.U64(static_cast<uint64_t>(absl::ToInt64Microseconds(a.lease)));
  w.U64(a.addr);
  return out;
}

}  // namespace ardma::lock
