// The hash table's algorithm: hopscotch-style buckets with per-bucket lock words, lock-free
// reads and a claimed resize, written once against Context so the same code runs next to the data
// (active mode) and on a client, one round trip per step (RDMA mode). Layout and protocol:
// dht_format.h; the words and shared steps: dht_table.h. The active-code library that exposes it
// (argument parsing and the function table) is dht_functions.cc; the typed client is DhtClient.
//
//   ARDMA_ASSIGN_OR_RETURN(dht::Table t, dht::OpenByName(ctx, "users", /*create=*/true));
//   ARDMA_ASSIGN_OR_RETURN(bool created, dht::Put(ctx, t, "alice", "42"));
//
// Every operation may run concurrently with any other, from any number of clients and active
// functions. Each takes the table as the caller last saw it and leaves in `t` the geometry it
// ended with (a client caches it). A stale header address fails with a stale-root status.
#ifndef ARDMA_SERVICES_DHT_DHT_H_
#define ARDMA_SERVICES_DHT_DHT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "services/dht/dht_format.h"
#include "services/dht/dht_table.h"

namespace ardma::dht {

// The table named `name`; with `create`, a missing one is created (one racing creator wins).
absl::StatusOr<Table> OpenByName(Context& ctx, std::string_view name, bool create);
// The target's table: by name, or as the client cached it (re-read if it cached no geometry).
absl::StatusOr<Table> Resolve(Context& ctx, const Target& target, bool create);

// Where `key` of `target` checks that its slot is served here: as an RDMA-mode client cached it,
// or, by name, this server's fence (none outside a cluster, or for an unfenced caller).
absl::StatusOr<Fence> FenceOf(Context& ctx, const Target& target, std::string_view key);
// A table that could not be resolved: NOT_FOUND (no table) only if the key's slot is served here,
// else the redirect.
absl::Status Missing(Context& ctx, const absl::Status& resolved, const Fence& fence, bool write);

// get and contains from a target as the library's functions parse it: the table as the lookup
// left it (its geometry, for the caller's cache) and whether `key` is present (its value in
// *value, if given). A slot not served here fails with its redirect status. An RDMA-mode client
// runs this directly, without encoding arguments for the function and decoding its answer.
struct Found {
  Table table;
  bool present = false;
};
// Where a key's entry was found, for a client to read it again in one READ (ReadCached): its
// address and length, and its checksum, which names this one write (entries carry a nonce).
struct EntryRef {
  uint64_t addr = 0;
  uint64_t checksum = 0;
  uint32_t size = 0;
};
// With `ref`, a key found is also described there if its entry is one READ's worth (16 KiB);
// else ref->addr stays 0.
absl::StatusOr<Found> ReadKey(Context& ctx, const Target& target, std::string_view key,
                              std::string* value, EntryRef* ref = nullptr);
// The key's value from the entry `ref` names, in one READ (with the fence's words, on a cluster
// member): true, with *value set (if given), if that very entry still holds the key; false if it
// has been replaced, removed or moved since — its writer retires it before answering (dht_format.h)
// — and the caller looks the key up as ReadKey does. A slot not served here fails with its
// redirect status. `target` is a cached one (its table id checks the entry).
absl::StatusOr<bool> ReadCached(Context& ctx, const Target& target, std::string_view key,
                                const EntryRef& ref, std::string* value);

// Each keyed operation takes the key's Fence (none by default): a slot that is not served here
// fails it with a redirect status (slots::RedirectOf); reads check after reading, writes after
// locking the key's bucket.
//
// Whether `key` is present; if so and `value` is not null, its value. Lock-free.
absl::StatusOr<bool> Lookup(Context& ctx, Table& t, std::string_view key, std::string* value,
                            const Fence& fence = {}, EntryRef* ref = nullptr);
// Inserts or replaces; true if it created the key.
absl::StatusOr<bool> Put(Context& ctx, Table& t, std::string_view key, std::string_view value,
                         const Fence& fence = {});
// Inserts only if absent; true if the key existed (its value, left alone, in *existing).
absl::StatusOr<bool> Insert(Context& ctx, Table& t, std::string_view key, std::string_view value,
                            std::string* existing, const Fence& fence = {});
// True if the key existed (and is now gone).
absl::StatusOr<bool> Remove(Context& ctx, Table& t, std::string_view key, const Fence& fence = {});
absl::StatusOr<uint64_t> Size(Context& ctx, const Table& t);

// Moving slots between servers (dht_format.h, "Moving slots"). Visits buckets [cursor, ...) of
// the table, locking each once as it passes (so a writer that checked the fence before the slots
// froze has finished), and exports (appends to *exported) or purges (removes, counting *removed)
// the keys of the slots set in `slots_bitmap` (kSlots bits) homed there, until about `budget`
// bytes were exported or keys visited. Returns the next cursor: 0 when the sweep is done, kRescan
// when the table was resized under it (sweep again from 0).
inline constexpr uint64_t kRescan = ~0ull;
enum class SweepAction { kExport, kPurge };
struct Exported {
  std::string key, value;
};
absl::StatusOr<uint64_t> Sweep(Context& ctx, Table& t, std::string_view table_name,
                               std::string_view slots_bitmap, SweepAction action, uint64_t cursor,
                               uint64_t budget, std::vector<Exported>* exported,
                               uint64_t* removed);

// Iterating a table, as Redis' SCAN does: from `cursor` (0 to start), appends the keys and values
// of home buckets in reverse-binary order to *out until about `count` keys or 8 × count buckets,
// and returns the next cursor (0: done). Every key present from the first call to the last is
// returned at least once — also when the table grows in between, since a cursor names home
// buckets by the low bits of their keys' hashes and doubling splits a bucket in two that come
// next in that order; a key put or removed meanwhile may or may not be, and one may come twice
// (after a resize). Lock-free, like Lookup.
absl::StatusOr<uint64_t> Scan(Context& ctx, Table& t, uint64_t cursor, size_t count,
                              std::vector<Exported>* out);

}  // namespace ardma::dht

#endif  // ARDMA_SERVICES_DHT_DHT_H_
