// The hash table service (DHT): its memory layout and the argument/result encoding of its active
// functions, shared by the functions (dht_functions.cc), DhtClient and services that Call it.
//
// Memory (region 0; words little-endian u64):
//
//   root "dht:<name>" -> table header address
//   table header (a heap block, 40 bytes):
//     0   magic "ARDMADH1"
//     8   table id (random, 32 bits, never 0): seeds entry checksums and tags buckets
//     16  geometry: bucket array address | log2(buckets) << 48 | generation << 54 (10 bits)
//     24  count of live keys (FETCH_ADD)
//     32  resize claim: 0, or the resizer's nonce (CAS)
//   bucket array: buckets + 1 buckets of 64 bytes (the last only extends the neighbourhood of
//   the one before it). A key with hash h lives in bucket (h mod buckets) or the next one: its
//   neighbourhood, 128 contiguous bytes that one READ fetches.
//     bucket := control:u64 slot:u64 * 7
//     control := table id << 32 | generation << 22 | holder slot << 2 | state
//                state 0 unlocked, 1 locked (a writer owns the keys homed here), 2 moved
//     slot := 0 (empty) | entry address | block class << 48 | fingerprint bits
//             (fingerprint: 14 bits of the key's hash; 10 in bits 54..63, 4 in bits 0..3)
//   entry (a heap block, immutable once published, until retired):
//     0   checksum = StableHash(bytes 8.., seed = table id)
//     8   hash of the key, bits 0..39 (a bucket array has at most 2^40 buckets) | a nonce of
//         the write << 40 (so two writes of one key and value differ)
//     16  key length:u32  value length:u32; both ~0 once retired
//     24  key, value
//
// Protocol. Readers take no locks: read the neighbourhood, then the entries whose fingerprint
// matches, and accept an entry only if its checksum and key verify (an entry freed or reused
// under the reader fails the checksum: the reader starts over). A writer locks the key's home
// bucket (CAS on its control word, naming its lock-owner slot: core/context/lock_owner.h), so
// writers of one key are serialized while writers of other keys only race for empty slots with
// CAS. Updates are out of place: write a new entry, CAS the slot from the old entry to the new,
// unlock, retire the old (set its lengths to ~0) and free it. A client may cache where it found
// a key's entry and read it alone next time (a checksum it knows names one write, and a retired
// entry fails), since every entry taken out of a bucket is retired before its writer answers.
// A resize claims the header, locks every home bucket, rehashes the slots (entries do not move)
// into an array twice as large, publishes the new geometry and marks the old buckets moved;
// whoever meets a moved bucket or a stale tag re-reads the geometry. A bucket lock whose holder's
// slot is vacant, or a resize claim (a holder value, services/lock_word.h) whose owner ended,
// belongs to a client whose connection is gone and is taken over; a slow holder keeps it.
//
// Functions (u64/u32/u16 little-endian):
//   target := 0:u8 name:str16                      ; by name, fenced by the server's slot
//                                                  ; fence if it has one
//           | 1:u8 header:u64 id:u64 geometry:u64  ; cached by a client (dht.open resolves it;
//                                                  ; geometry 0: unknown, read the header)
//           | 2:u8 header:u64 id:u64 geometry:u64 fence:u64 slot:u32
//                                                  ; the same, on a cluster member: the key's
//                                                  ; slot and its fence entry (core/slots.h)
//           | 3:u8 name:str16                      ; by name, unfenced: services that keep
//                                                  ; tables of their own (the lock service)
//   dht.open      name:str16 [create:u8]     -> header:u64 id:u64 geometry:u64 fence:u64
//                 the table (created unless create = 0: then NOT_FOUND if missing) and the
//                 server's slot fence (0: none), for a client to cache as a target
//   dht.put       target key:bytes32 value:bytes32 -> geometry:u64 created:u8   (creates)
//   dht.get       target key:bytes32         -> geometry:u64 found:u8 [value:bytes32]
//   dht.contains  target key:bytes32         -> geometry:u64 found:u8
//   dht.remove    target key:bytes32         -> geometry:u64 found:u8
//   dht.size      target                     -> geometry:u64 count:u64
//   dht.scan      target cursor:u64 count:u32
//                 -> geometry:u64 next:u64 n:u32 (key:bytes32 value:bytes32)*
//                 about `count` keys of the home buckets from `cursor` on in reverse-binary order
//                 (dht.h, Scan); next = 0 when the table has been gone through
// Every result starts with the geometry the function last used, so RDMA-mode clients keep their
// cache current. A missing key is found = 0, not an error; reading a table that was never
// written is NOT_FOUND. On a cluster member whose fence sends the key elsewhere, the keyed
// functions answer instead
//   redirect := ~0:u64 frozen:u8 slot:u32 epoch:u64 owner:u64
// (frozen: the slot is moving away, ask again shortly; else it moved: refresh the slot map).
// A cached target whose header holds no longer that table (the server lost its memory) is
// answered with
//   stale := ~1:u64 message:bytes32
// and the client resolves the name again (RootCache).
//
// Moving slots (the cluster's rebalance, run against a member in active mode):
//   dht.tables                                -> count:u32 (name:str16)*    ; tables held here
//   dht.export  name:str16 slots:bytes32 cursor:u64 geometry:u64 budget:u32
//               -> next:u64 geometry:u64 count:u32 (key:bytes32 value:bytes32)*
//               the keys of `slots` (a 2048-byte, kSlots-bit bitmap) homed in buckets from
//               `cursor` on, about `budget` bytes; every bucket is locked once as it is passed
//               (waiting out writers that checked the fence before the slots froze); next = 0
//               when done, ~0 when the table was resized under the sweep (`geometry` is the one
//               it started on): start again from 0
//   dht.import  name:str16 count:u32 (key:bytes32 value:bytes32)*  -> count:u32   ; unfenced puts
//   dht.purge   (as export) -> next:u64 geometry:u64 removed:u64  ; removes them instead
#ifndef ARDMA_SERVICES_DHT_DHT_FORMAT_H_
#define ARDMA_SERVICES_DHT_DHT_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/slots.h"

namespace ardma::dht {

inline constexpr std::string_view kRootPrefix = "dht:";
inline constexpr size_t kMaxNameBytes = 43;  // heap root names are at most 47 bytes
inline constexpr uint64_t kMaxKeyBytes = 1u << 20;
inline constexpr uint64_t kMaxValueBytes = 16u << 20;

struct Target {
  std::string_view name;  // used when header == 0
  uint64_t header = 0;
  uint64_t id = 0;
  uint64_t geometry = 0;
  // A cached target on a cluster member: the fence entry of the key's slot (0: none).
  uint64_t fence = 0;
  uint32_t slot = 0;
  // By name: skip the server's fence (services' own tables).
  bool unfenced = false;
};

// InvalidArgument unless 1..kMaxNameBytes bytes without NUL.
absl::Status CheckName(std::string_view name);
void EncodeTarget(const Target& target, std::string* out);

// Arguments of put / get / contains / remove / size after the target.
std::string EncodeKeyArgs(std::string_view key);
std::string EncodePutArgs(std::string_view key, std::string_view value);

inline constexpr uint64_t kRedirectGeometry = ~0ull;
// A reply's geometry word when the table address the caller gave (a cached target) holds no longer
// that table: the message follows (Bytes32). DecodeReply turns it back into StaleRootError, so the
// caller's RootCache resolves the name again.
inline constexpr uint64_t kStaleGeometry = ~1ull;

struct Reply {
  uint64_t geometry = 0;
  std::optional<slots::Redirect> redirect;  // the key is not served here (see above)
  bool flag = false;                 // created (put), found (get, contains, remove)
  uint64_t count = 0;                // size
  std::optional<std::string> value;  // get, when found
  uint64_t next = 0;                                         // scan: the next cursor
  std::vector<std::pair<std::string, std::string>> items;  // scan: keys and values
};
enum class ReplyKind { kFlag, kFlagAndValue, kCount, kScan };
absl::StatusOr<Reply> DecodeReply(std::string_view bytes, ReplyKind kind);
// The redirect answer.
std::string EncodeRedirect(const slots::Redirect& redirect);
// The stale-target answer, with the status's message.
std::string EncodeStale(const absl::Status& status);

}  // namespace ardma::dht

#endif  // ARDMA_SERVICES_DHT_DHT_FORMAT_H_
