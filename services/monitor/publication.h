// How the RDMA-Async agent publishes samples in a read-only region that front ends READ
// one-sidedly, and how a reader tells a whole sample from a torn one.
//
// Region layout (little-endian u64 words):
//   0   magic "ARDMAMON"
//   8   slot size in bytes (a multiple of 64)
//   16  the agent's sampling interval, nanoseconds
//   24  reserved (0) ... up to 64
//   64  slot 0, then slot 1
//   slot := sequence:u64 length:u64 checksum:u64 payload[length]
//           checksum = StableHash(sequence || length || payload)
//
// The writer alternates slots (sample n goes to slot n % 2), so the slot it is not writing holds
// the previous sample whole. A READ of the two slots is not atomic and may copy in any order (as
// a NIC may): a reader accepts a slot only if its checksum matches, and takes the accepted slot
// with the higher sequence. A torn copy fails the checksum (a 64-bit hash: a false accept has
// probability 2^-64), so a torn sample is never returned; if both slots are torn the reader
// retries. No ordering between the writer's stores is relied on.
#ifndef ARDMA_SERVICES_MONITOR_PUBLICATION_H_
#define ARDMA_SERVICES_MONITOR_PUBLICATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ardma::monitor {

inline constexpr uint64_t kPublicationMagic = 0x4e4f4d414d445241ull;  // "ARDMAMON"
inline constexpr uint64_t kPublicationHeaderBytes = 64;
inline constexpr uint64_t kSlotHeaderBytes = 24;

// The slot size (and so the region size) for payloads of up to `max_payload` bytes.
uint64_t SlotSizeFor(uint64_t max_payload);
inline uint64_t PublicationBytes(uint64_t slot_size) {
  return kPublicationHeaderBytes + 2 * slot_size;
}

// Writes into memory the writer owns (a read-only region's mapping). One writer.
class Publisher {
 public:
  // `base` points at PublicationBytes(slot_size) bytes.
  Publisher(char* base, uint64_t slot_size, uint64_t interval_ns);
  // InvalidArgument if the payload does not fit a slot. `sequence` must grow.
  absl::Status Publish(uint64_t sequence, std::string_view payload);
  uint64_t slot_size() const { return slot_size_; }

 private:
  char* base_;
  uint64_t slot_size_;
};

struct PublicationHeader {
  uint64_t slot_size = 0;
  uint64_t interval_ns = 0;
};
// DataLoss unless `bytes` (at least the first 64 bytes of a region) start with a publication
// header.
absl::StatusOr<PublicationHeader> ParsePublicationHeader(std::string_view bytes);

struct Published {
  uint64_t sequence = 0;
  std::string payload;
};
// From a copy of the whole publication (header and both slots): the newest whole slot.
// Unavailable if neither slot is whole (torn, or nothing published yet: retry), DataLoss if the
// bytes are not a publication of this slot size.
absl::StatusOr<Published> ParsePublication(std::string_view bytes);

}  // namespace ardma::monitor

#endif  // ARDMA_SERVICES_MONITOR_PUBLICATION_H_
