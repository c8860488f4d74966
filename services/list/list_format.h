// The list service's memory layout and the argument/result encoding of its active functions,
// shared by the functions (list_functions.cc) and ListClient.
//
// Memory (region 0; all words little-endian u64):
//
//   root "list:<name>"  -> header address
//   header (a heap block, 32 bytes):
//     0   magic "ARDMALS2" ("ARDMALS1": a list made before ends carried an incarnation)
//     8   head   : link to the first node (0 when empty)
//     16  count  : live elements (FETCH_ADD +1 after an append/prepend is linked, -1 when an
//                  element is marked removed)
//     24  state  : slot << 1 | not served. The slot is recorded when the list is sealed for a
//                  move; not served (moved away, or adopted and not served yet) makes every call
//                  on the list answer the redirect its slot's fence gives.
//   node (a heap block, at least 64 bytes so one 64-byte READ fetches a node and a short value):
//     0   next   : link to the next node; bit 0 set = THIS node is removed (Harris mark). The
//                  last node's is its end: address 0 and its own incarnation << 48, so that a
//                  CAS expecting it fails once the node is freed and its block reused.
//     8   tag    : header address | incarnation << 48   (0 once the node is freed)
//     16  meta   : value type << 56 | value length      (type 1 = int64, 2 = bytes)
//     24  value bytes
//   link := node address | incarnation << 48 | sealed bit (2) | removed bit (1)
//   A link word with the sealed bit never changes again (until the move is undone): a cluster
//   moving the list's slot seals every link word, head first, in list order, so every change
//   (each a CAS expecting an unsealed word) fails and answers the redirect, while reads go on.
//
// Concurrency: links are published with CAS, so concurrent appenders and prependers lose
// nothing. remove(i) marks the node's own next word (so no append can link behind it), then
// unlinks it with a CAS on its predecessor; whoever unlinks a node poisons its tag and frees it.
// Every node read is validated: the link's incarnation must match the node's tag and the tag must
// name this list, otherwise the node was freed under the reader and the walk restarts. (A READ torn
// across a free and a reuse of the same node, within one memcpy, could slip through: documented
// residual risk, see docs/list.md.)
//
// Function arguments and results (u64/u32/u16 little-endian):
//   target  := 0:u8 name:str16            ; by name (active mode: resolved on the server)
//            | 1:u8 header:u64            ; by header address (RDMA mode: cached by ListClient)
//   value   := type:u8 bytes:bytes32      ; int64 values are 8 bytes
//   list.open     name:str16                      -> header:u64   (creates the list)
//   list.append   target value                    -> ""           (creates the list)
//   list.prepend  target value                    -> ""           (creates the list)
//   list.get      target index:u64                -> value
//   list.remove   target index:u64                -> value        (the removed one)
//   list.size     target                          -> count:u64
//   list.scan     target cursor max_items:u32 max_bytes:u32
//                                                 -> n:u32 value*n cursor
//     cursor := link:u64 index:u64 done:u8        ; all zero = from the start
#ifndef ARDMA_SERVICES_LIST_LIST_FORMAT_H_
#define ARDMA_SERVICES_LIST_LIST_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ardma::list {

// A list element: a signed 64-bit integer or a byte string.
using ListValue = std::variant<int64_t, std::string>;

inline constexpr std::string_view kRootPrefix = "list:";
// The namespace of list names in a cluster's slot hash (docs/cluster.md).
inline constexpr std::string_view kListSpace = "list";
inline constexpr size_t kMaxNameBytes = 42;            // heap root names are at most 47 bytes
inline constexpr uint64_t kMaxValueBytes = 16u << 20;  // one element
inline constexpr uint64_t kHeaderMagic = 0x32534C414d445241ull;    // "ARDMALS2"
inline constexpr uint64_t kHeaderMagicV1 = 0x31534C414d445241ull;  // "ARDMALS1"
inline constexpr uint64_t kNodeHeaderBytes = 24;
inline constexpr uint64_t kNodeReadBytes = 64;  // one READ per node walked
inline constexpr uint8_t kTypeInt64 = 1;
inline constexpr uint8_t kTypeBytes = 2;

struct Target {
  std::string_view name;  // when header == 0
  uint64_t header = 0;
};

struct ScanCursor {
  uint64_t link = 0;
  uint64_t index = 0;
  bool done = false;
};

struct ScanPage {
  std::vector<ListValue> values;
  ScanCursor next;
};

// InvalidArgument unless 1..kMaxNameBytes bytes without NUL.
absl::Status CheckName(std::string_view name);

void EncodeTarget(const Target& target, std::string* out);
void EncodeValue(const ListValue& value, std::string* out);
// list.scan's arguments after the target.
std::string EncodeScanRest(const ScanCursor& cursor, uint32_t max_items, uint32_t max_bytes);

absl::StatusOr<ListValue> DecodeValueResult(std::string_view bytes);
absl::StatusOr<ScanPage> DecodeScanResult(std::string_view bytes);

}  // namespace ardma::list

#endif  // ARDMA_SERVICES_LIST_LIST_FORMAT_H_
