// Moving hash-table keys between the servers of a cluster, for its rebalance (docs/cluster.md,
// "Moving slots"): what the mover runs, in active mode, against the server the slots leave and
// the server they go to. The slots are given as a bitmap of kSlots bits (SlotBitmap).
#ifndef ARDMA_SERVICES_DHT_DHT_MOVER_H_
#define ARDMA_SERVICES_DHT_DHT_MOVER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/client/client.h"

namespace ardma::dht {

// The kSlots-bit bitmap of `slots`.
std::string SlotBitmap(const std::vector<uint32_t>& slots);

// The tables `server` holds (by name; including services' own tables, e.g. the lock service's).
absl::StatusOr<std::vector<std::string>> TablesOn(Client& server);

// How many keys `table` holds on `server` alone.
absl::StatusOr<uint64_t> TableSize(Client& server, const std::string& table);

// Copies every key of `table` in the bitmap's slots from `from` to `to` (replacing what `to` has),
// sweeping `from`'s buckets under their locks; returns how many it copied. The slots must be
// frozen on `from` first, so that no write is missed.
absl::StatusOr<uint64_t> CopySlots(Client& from, Client& to, const std::string& table,
                                   const std::string& bitmap);
// Removes every key of `table` in the bitmap's slots from `server`; returns how many.
absl::StatusOr<uint64_t> PurgeSlots(Client& server, const std::string& table,
                                    const std::string& bitmap);
// Every key of `table` on `server` with its value (for small tables, checks and tools).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> EntriesOf(Client& server,
                                                                          const std::string& table);
// The keys alone (e.g. the lock service's names).
absl::StatusOr<std::vector<std::string>> KeysOf(Client& server, const std::string& table);

}  // namespace ardma::dht

#endif  // ARDMA_SERVICES_DHT_DHT_MOVER_H_
