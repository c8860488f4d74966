#include "services/monitor/publication.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "services/stable_hash.h"

namespace ardma::monitor {
namespace {

uint64_t Word(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void PutWord(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

uint64_t SlotChecksum(uint64_t sequence, std::string_view payload) {
  uint64_t head[2] = {sequence, payload.size()};
  return StableHash(payload, StableHash(std::string_view(reinterpret_cast<const char*>(head),
                                                         sizeof(head))));
}

}  // namespace

uint64_t SlotSizeFor(uint64_t max_payload) {
  return (kSlotHeaderBytes + max_payload + 63) / 64 * 64;
}

Publisher::Publisher(char* base, uint64_t slot_size, uint64_t interval_ns)
    : base_(base), slot_size_(slot_size) {
  std::memset(base_, 0, PublicationBytes(slot_size));
  PutWord(base_, kPublicationMagic);
  PutWord(base_ + 8, slot_size);
  PutWord(base_ + 16, interval_ns);
}

absl::Status Publisher::Publish(uint64_t sequence, std::string_view payload) {
  if (payload.size() > slot_size_ - kSlotHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload of ", payload.size(), " bytes does not fit a slot of ", slot_size_));
  }
  char* slot = base_ + kPublicationHeaderBytes + (sequence % 2) * slot_size_;
  PutWord(slot + 16, 0);  // invalid while being written (a stale checksum would not match anyway)
  PutWord(slot, sequence);
  PutWord(slot + 8, payload.size());
  std::memcpy(slot + kSlotHeaderBytes, payload.data(), payload.size());
  PutWord(slot + 16, SlotChecksum(sequence, payload));
  return absl::OkStatus();
}

absl::StatusOr<PublicationHeader> ParsePublicationHeader(std::string_view bytes) {
  if (bytes.size() < kPublicationHeaderBytes || Word(bytes.data()) != kPublicationMagic) {
    return absl::DataLossError("not a load-monitor publication (bad magic)");
  }
  PublicationHeader h;
  h.slot_size = Word(bytes.data() + 8);
  h.interval_ns = Word(bytes.data() + 16);
  if (h.slot_size < 64 || h.slot_size % 64 != 0 || h.slot_size > (1ull << 30)) {
    return absl::DataLossError("load-monitor publication: bad slot size");
  }
  return h;
}

absl::StatusOr<Published> ParsePublication(std::string_view bytes) {
  absl::StatusOr<PublicationHeader> header = ParsePublicationHeader(bytes);
  if (!header.ok()) return header.status();
  if (bytes.size() != PublicationBytes(header->slot_size)) {
    return absl::DataLossError("load-monitor publication: size does not match its slot size");
  }
  int best = -1;
  Published slots[2];
  for (int i = 0; i < 2; ++i) {
    const char* slot = bytes.data() + kPublicationHeaderBytes + i * header->slot_size;
    uint64_t sequence = Word(slot), length = Word(slot + 8), checksum = Word(slot + 16);
    if (sequence == 0 || length > header->slot_size - kSlotHeaderBytes) continue;
    std::string_view payload(slot + kSlotHeaderBytes, length);
    if (checksum != SlotChecksum(sequence, payload)) continue;
    slots[i] = {sequence, std::string(payload)};
    if (best < 0 || sequence > slots[best].sequence) best = i;
  }
  if (best < 0) return absl::UnavailableError("no whole sample in the publication (torn)");
  return std::move(slots[best]);
}

}  // namespace ardma::monitor
