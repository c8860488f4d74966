#include "core/slots.h"

#include <array>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace ardma::slots {
namespace {

constexpr char kRedirectPayload[] = "ardma.redirect";

// CRC-16/XMODEM eight bytes at a time ("slicing by 8"): kCrc[k][x] is what byte x followed by k
// zero bytes contributes. The CRC is linear, so a block's result is the XOR of its bytes'
// contributions (the running CRC XORed into its first two), eight independent loads per block
// where a byte at a time makes each load wait for the one before.
using CrcTable = std::array<std::array<uint16_t, 256>, 8>;
constexpr CrcTable MakeCrcTables() {
  CrcTable t{};
  for (int byte = 0; byte < 256; ++byte) {
    uint16_t crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
    t[0][byte] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (int byte = 0; byte < 256; ++byte) {
      uint16_t prev = t[k - 1][byte];
      t[k][byte] = static_cast<uint16_t>((prev << 8) ^ t[0][prev >> 8]);
    }
  }
  return t;
}
constexpr CrcTable kCrc = MakeCrcTables();

}  // namespace

uint16_t Crc16(std::string_view bytes, uint16_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  for (; n >= 8; n -= 8, p += 8) {
    const unsigned w = crc ^ (unsigned{p[0]} << 8 | p[1]);
    crc = static_cast<uint16_t>(kCrc[7][w >> 8] ^ kCrc[6][w & 0xff] ^ kCrc[5][p[2]] ^
                                kCrc[4][p[3]] ^ kCrc[3][p[4]] ^ kCrc[2][p[5]] ^ kCrc[1][p[6]] ^
                                kCrc[0][p[7]]);
  }
  for (; n > 0; --n, ++p) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc[0][((crc >> 8) ^ *p) & 0xff]);
  }
  return crc;
}

uint32_t SlotOf(std::string_view space, std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  uint16_t crc = Crc16(space);
  crc = Crc16(std::string_view("\0", 1), crc);
  return Crc16(key, crc) % kSlots;
}

absl::Status CheckFence(uint32_t slot, uint64_t word, uint64_t owner_word, bool write) {
  SlotState state = StateOf(word);
  if (state == SlotState::kOwned || (state == SlotState::kFrozen && !write)) {
    return absl::OkStatus();
  }
  return RedirectStatus({.frozen = state == SlotState::kFrozen,
                         .slot = slot,
                         .epoch = EpochOf(word),
                         .owner = state == SlotState::kMoved ? owner_word : 0});
}

std::string RedirectBytes(const Redirect& r) {
  std::string bytes(kRedirectBytes, '\0');
  bytes[0] = r.frozen ? 1 : 0;
  std::memcpy(bytes.data() + 1, &r.slot, 4);
  std::memcpy(bytes.data() + 5, &r.epoch, 8);
  std::memcpy(bytes.data() + 13, &r.owner, 8);
  return bytes;
}

std::optional<Redirect> RedirectFromBytes(std::string_view bytes) {
  if (bytes.size() != kRedirectBytes) return std::nullopt;
  Redirect r;
  r.frozen = bytes[0] != 0;
  std::memcpy(&r.slot, bytes.data() + 1, 4);
  std::memcpy(&r.epoch, bytes.data() + 5, 8);
  std::memcpy(&r.owner, bytes.data() + 13, 8);
  return r;
}

absl::Status RedirectStatus(const Redirect& r) {
  absl::Status status = absl::FailedPreconditionError(
      r.frozen ? absl::StrCat("slot ", r.slot, " is moving to another server (epoch ", r.epoch, ")")
               : absl::StrCat("slot ", r.slot, " is not served here (moved at epoch ", r.epoch,
                              r.owner != 0 ? absl::StrCat(" to ", absl::Hex(r.owner, absl::kZeroPad16))
                                           : std::string(),
                              ")"));
  status.SetPayload(kRedirectPayload, absl::Cord(RedirectBytes(r)));
  return status;
}

std::optional<Redirect> RedirectOf(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  auto payload = status.GetPayload(kRedirectPayload);
  if (!payload.has_value()) return std::nullopt;
  return RedirectFromBytes(std::string(*payload));
}

}  // namespace ardma::slots
