#include "services/list/list.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/random64.h"
#include "services/root_cache.h"

namespace ardma::list {
namespace {

using wire::ByteWriter;

constexpr uint64_t kAddrMask = ((1ull << 48) - 1) & ~15ull;
constexpr uint64_t kRemovedBit = 1;
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kHeadOffset = 8;
constexpr uint64_t kCountOffset = 16;
constexpr uint64_t kInlineValueBytes = kNodeReadBytes - kNodeHeaderBytes;
constexpr uint32_t kMaxPageBytes = 8u << 20;
// A walk restarts when a node it reached was freed under it; that needs a concurrent remove each
// time, so this bound is never reached in practice.
constexpr int kMaxRestarts = 100000;

uint64_t LinkAddr(uint64_t link) { return link & kAddrMask; }
uint64_t LinkIncarnation(uint64_t link) { return link >> 48; }
uint64_t MakeLink(uint64_t addr, uint64_t incarnation) { return addr | (incarnation << 48); }
// The next word of the last node reached through `link`: no address, the node's own incarnation
// (0 for the header's head word). A node freed and reused carries another, so a CAS that expects
// it cannot link behind, or mark, a block that is no longer this node.
uint64_t EndOf(uint64_t link) { return MakeLink(0, LinkIncarnation(link)); }

uint64_t NewIncarnation() {
  uint64_t v;
  do v = Random64() & 0xffff;
  while (v == 0);
  return v;
}

absl::Status TooManyRestarts() {
  return absl::AbortedError("list walk restarted too often under concurrent removes");
}

struct Header {
  uint64_t head = 0;
  uint64_t count = 0;
  bool v1 = false;  // made before EndOf: its tails' next words may be plain 0
};

absl::StatusOr<Header> ReadHeader(Context& ctx, uint64_t header) {
  char bytes[24];
  ARDMA_RETURN_IF_ERROR(ctx.Read(header, std::span<char>(bytes, 24)));
  uint64_t magic;
  Header h;
  std::memcpy(&magic, bytes, 8);
  std::memcpy(&h.head, bytes + 8, 8);
  std::memcpy(&h.count, bytes + 16, 8);
  h.v1 = magic == kHeaderMagicV1;
  if (magic != kHeaderMagic && !h.v1) {
    return StaleRootError(
        absl::InvalidArgumentError(absl::StrCat("no list header at address ", header)));
  }
  return h;
}

// ---- Nodes ----

struct Node {
  uint64_t link = 0;  // how we reached it
  uint64_t next = 0;  // its next word, removed bit included
  uint8_t type = 0;
  uint64_t length = 0;
  char prefix[kInlineValueBytes];

  bool removed() const { return (next & kRemovedBit) != 0; }
  uint64_t successor() const { return next & ~kRemovedBit; }
};

// One READ. nullopt when the node no longer belongs to this list under this incarnation (it was
// freed, and maybe reused, after the link to it was read): the caller restarts its walk.
absl::StatusOr<std::optional<Node>> ReadNode(Context& ctx, uint64_t header, uint64_t link) {
  char bytes[kNodeReadBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(LinkAddr(link), std::span<char>(bytes, kNodeReadBytes)));
  Node node;
  uint64_t tag, meta;
  std::memcpy(&node.next, bytes, 8);
  std::memcpy(&tag, bytes + 8, 8);
  std::memcpy(&meta, bytes + 16, 8);
  node.link = link;
  node.type = static_cast<uint8_t>(meta >> 56);
  node.length = meta & ((1ull << 56) - 1);
  std::memcpy(node.prefix, bytes + kNodeHeaderBytes, kInlineValueBytes);
  if (tag != MakeLink(header, LinkIncarnation(link)) || node.length > kMaxValueBytes ||
      (node.type != kTypeInt64 && node.type != kTypeBytes) ||
      (node.type == kTypeInt64 && node.length != 8)) {
    return std::nullopt;
  }
  return node;
}

// The node's value; nullopt if the node was freed while its tail was being read.
absl::StatusOr<std::optional<ListValue>> ReadValue(Context& ctx, uint64_t header,
                                                   const Node& node) {
  std::string bytes(node.prefix, std::min(node.length, kInlineValueBytes));
  if (node.length > kInlineValueBytes) {
    bytes.resize(node.length);
    char tag_bytes[8];
    uint64_t addr = LinkAddr(node.link);
    // One batch: the tail, then the tag again. The server applies them in order, so an unchanged
    // tag proves the tail was read before any free of the node.
    ReadOp ops[2] = {{addr + kNodeReadBytes, std::span<char>(bytes).subspan(kInlineValueBytes)},
                     {addr + 8, std::span<char>(tag_bytes, 8)}};
    ARDMA_RETURN_IF_ERROR(ctx.ReadBatch(ops));
    uint64_t tag;
    std::memcpy(&tag, tag_bytes, 8);
    if (tag != MakeLink(header, LinkIncarnation(node.link))) return std::nullopt;
  }
  if (node.type == kTypeInt64) {
    uint64_t v;
    std::memcpy(&v, bytes.data(), 8);
    return ListValue(static_cast<int64_t>(v));
  }
  return ListValue(std::move(bytes));
}

// The word that links to the node after `prev_link` (0: the header's head word).
uint64_t LinkWordOf(uint64_t header, uint64_t prev_link) {
  return prev_link == 0 ? header + kHeadOffset : LinkAddr(prev_link);
}

// Unlinks a removed node from its predecessor's link word. The one whose CAS succeeds poisons the
// node's tag and frees it. Returns whether this call unlinked it.
absl::StatusOr<bool> Unlink(Context& ctx, uint64_t header, uint64_t prev_link, const Node& node) {
  uint64_t successor = node.successor();
  if (LinkAddr(successor) == 0) successor = EndOf(prev_link);  // the predecessor becomes the tail
  ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(LinkWordOf(header, prev_link),
                                                           node.link, successor));
  if (!cas.swapped) return false;
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(LinkAddr(node.link) + 8, 0));
  ARDMA_RETURN_IF_ERROR(heap::Free(ctx, LinkAddr(node.link)));
  return true;
}

// Walks live nodes in order, helping to unlink removed ones. `visit(prev_link, node, index)`
// returns true to stop; prev_link is 0 for the first node. Returns false if the walk must restart (a node was freed under it), true
// when it stopped or reached the end.
template <typename Visit>
absl::StatusOr<bool> Walk(Context& ctx, uint64_t header, uint64_t head, uint64_t* index_out,
                          Visit visit) {
  uint64_t prev_link = 0;
  uint64_t link = head, index = 0;
  while (LinkAddr(link) != 0) {
    ARDMA_ASSIGN_OR_RETURN(std::optional<Node> node, ReadNode(ctx, header, link));
    if (!node) return false;
    if (node->removed()) {
      ARDMA_ASSIGN_OR_RETURN(bool unlinked, Unlink(ctx, header, prev_link, *node));
      if (!unlinked) return false;
      link = node->successor();
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(bool stop, visit(prev_link, *node, index));
    if (stop) {
      *index_out = index;
      return true;
    }
    prev_link = link;
    link = node->next;
    ++index;
  }
  *index_out = index;
  return true;
}

// Allocates and fills a node holding `value`, the end of a list. Returns its link.
absl::StatusOr<uint64_t> NewNode(Context& ctx, uint64_t header, const ListValue& value) {
  std::string encoded;
  EncodeValue(value, &encoded);
  std::string_view bytes = std::string_view(encoded).substr(5);  // type:u8 length:u32 bytes
  uint8_t type = static_cast<uint8_t>(encoded[0]);
  uint64_t payload = std::max<uint64_t>(kNodeHeaderBytes + bytes.size(), kNodeReadBytes);
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, heap::Allocate(ctx, payload));
  uint64_t link = MakeLink(addr, NewIncarnation());
  std::string node;
  node.reserve(kNodeHeaderBytes + bytes.size());
  ByteWriter w(&node);
  w.U64(EndOf(link));
  w.U64(MakeLink(header, LinkIncarnation(link)));
  w.U64(static_cast<uint64_t>(type) << 56 | bytes.size());
  w.Bytes(bytes);
  absl::Status written = ctx.Write(addr, node);
  if (!written.ok()) {
    heap::Free(ctx, addr).IgnoreError();
    return written;
  }
  return link;
}

}  // namespace

// ---- Lists by name ----

absl::StatusOr<uint64_t> OpenByName(Context& ctx, std::string_view name, bool create) {
  ARDMA_RETURN_IF_ERROR(CheckName(name));
  std::string root = absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(name));
  absl::StatusOr<uint64_t> found = heap::GetRoot(ctx, root);
  if (found.ok() || !absl::IsNotFound(found.status())) return found;
  if (!create) return absl::NotFoundError(absl::StrCat("no list named '", ToAbsl(name), "'"));
  ARDMA_ASSIGN_OR_RETURN(uint64_t header, heap::Allocate(ctx, kHeaderBytes));
  char bytes[kHeaderBytes] = {};
  std::memcpy(bytes, &kHeaderMagic, 8);  // head 0: EndOf the header
  absl::Status written = ctx.Write(header, std::string_view(bytes, kHeaderBytes));
  absl::StatusOr<uint64_t> published =
      written.ok() ? heap::GetOrCreateRoot(ctx, root, header) : absl::StatusOr<uint64_t>(written);
  if (!published.ok() || *published != header) {
    // Someone else created it first (or we failed): give our header back.
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, header));
  }
  return published;
}

absl::StatusOr<uint64_t> Resolve(Context& ctx, const Target& target, bool create) {
  if (target.header != 0) return target.header;
  return OpenByName(ctx, target.name, create);
}

// ---- Operations ----

absl::Status Append(Context& ctx, uint64_t header, const ListValue& value) {
  ARDMA_ASSIGN_OR_RETURN(Header h, ReadHeader(ctx, header));
  ARDMA_ASSIGN_OR_RETURN(uint64_t link, NewNode(ctx, header, value));
  for (int restart = 0; restart < kMaxRestarts; ++restart) {
    if (restart > 0) {
      ARDMA_ASSIGN_OR_RETURN(h, ReadHeader(ctx, header));
    }
    // Find the last live node: a walk that never stops early.
    uint64_t tail = 0, ignored;
    ARDMA_ASSIGN_OR_RETURN(
        bool walked, Walk(ctx, header, h.head, &ignored, [&](uint64_t, const Node& node, uint64_t) {
          tail = node.link;
          return absl::StatusOr<bool>(false);
        }));
    if (!walked) continue;
    // Publish behind the tail. If someone got there first, walk on from what they linked.
    for (;;) {
      ARDMA_ASSIGN_OR_RETURN(CasResult cas,
                             ctx.CompareAndSwap(LinkWordOf(header, tail), EndOf(tail), link));
      if (!cas.swapped && cas.observed == 0 && h.v1 && tail != 0) {
        ARDMA_ASSIGN_OR_RETURN(cas, ctx.CompareAndSwap(LinkAddr(tail), 0, link));
      }
      if (cas.swapped) {
        return ctx.FetchAdd(header + kCountOffset, 1).status();
      }
      // The tail was removed (marked), or freed and reused (another end): start over.
      if (cas.observed & kRemovedBit || LinkAddr(cas.observed) == 0) break;
      ARDMA_ASSIGN_OR_RETURN(std::optional<Node> node, ReadNode(ctx, header, cas.observed));
      if (!node) break;
      tail = cas.observed;
      if (node->next != EndOf(tail)) break;  // more than one node arrived: walk again
    }
  }
  heap::Free(ctx, LinkAddr(link)).IgnoreError();
  return TooManyRestarts();
}

absl::Status Prepend(Context& ctx, uint64_t header, const ListValue& value) {
  ARDMA_ASSIGN_OR_RETURN(Header h, ReadHeader(ctx, header));
  ARDMA_ASSIGN_OR_RETURN(uint64_t link, NewNode(ctx, header, value));
  uint64_t head = h.head, next = EndOf(link);
  for (int attempt = 0; attempt < kMaxRestarts; ++attempt) {
    // The node's next word is the head it replaces, or its own end if the list is empty now
    // (perhaps again, after a failed CAS wrote an older head there).
    uint64_t want = LinkAddr(head) != 0 ? head : EndOf(link);
    if (want != next) ARDMA_RETURN_IF_ERROR(ctx.WriteU64(LinkAddr(link), want));
    next = want;
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(header + kHeadOffset, head, link));
    if (cas.swapped) return ctx.FetchAdd(header + kCountOffset, 1).status();
    head = cas.observed;
  }
  heap::Free(ctx, LinkAddr(link)).IgnoreError();
  return TooManyRestarts();
}

namespace {

// get and remove: find the live node at `index`.
absl::StatusOr<ListValue> GetOrRemove(Context& ctx, uint64_t header, uint64_t index, bool remove) {
  for (int restart = 0; restart < kMaxRestarts; ++restart) {
    ARDMA_ASSIGN_OR_RETURN(Header h, ReadHeader(ctx, header));
    std::optional<ListValue> result;
    bool stale = false;
    uint64_t reached;
    ARDMA_ASSIGN_OR_RETURN(
        bool walked,
        Walk(ctx, header, h.head, &reached,
             [&](uint64_t prev_link, const Node& node, uint64_t i) -> absl::StatusOr<bool> {
               if (i < index) return false;
               ARDMA_ASSIGN_OR_RETURN(std::optional<ListValue> value, ReadValue(ctx, header, node));
               if (!value) {
                 stale = true;
                 return true;
               }
               if (remove) {
                 // The linearization point: mark the node's own link word.
                 ARDMA_ASSIGN_OR_RETURN(
                     CasResult mark,
                     ctx.CompareAndSwap(LinkAddr(node.link), node.next, node.next | kRemovedBit));
                 if (!mark.swapped) {
                   stale = true;  // appended behind or removed by someone else: look again
                   return true;
                 }
                 ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(header + kCountOffset, ~0ull).status());
                 Node marked = node;
                 marked.next |= kRemovedBit;
                 ARDMA_RETURN_IF_ERROR(Unlink(ctx, header, prev_link, marked).status());
               }
               result = std::move(*value);
               return true;
             }));
    if (!walked || stale) continue;
    if (!result) {
      return absl::OutOfRangeError(
          absl::StrCat("index ", index, " is past the end of a list of ", reached, " elements"));
    }
    return std::move(*result);
  }
  return TooManyRestarts();
}

}  // namespace

absl::StatusOr<ListValue> Get(Context& ctx, uint64_t header, uint64_t index) {
  return GetOrRemove(ctx, header, index, /*remove=*/false);
}

absl::StatusOr<ListValue> Remove(Context& ctx, uint64_t header, uint64_t index) {
  return GetOrRemove(ctx, header, index, /*remove=*/true);
}

absl::StatusOr<uint64_t> Size(Context& ctx, uint64_t header) {
  ARDMA_ASSIGN_OR_RETURN(Header h, ReadHeader(ctx, header));
  // An element being removed may be counted down before the append that linked it counts it up.
  return h.count > (1ull << 63) ? 0 : h.count;
}

absl::StatusOr<std::string> Scan(Context& ctx, uint64_t header, const ScanCursor& cursor,
                                 uint32_t max_items, uint32_t max_bytes) {
  max_bytes = std::min(max_bytes, kMaxPageBytes);
  std::string out(4, '\0');
  if (cursor.done || max_items == 0) {
    ByteWriter w(&out);
    w.U64(0);
    w.U64(cursor.index);
    w.U8(1);
    return out;
  }
  for (int restart = 0; restart < kMaxRestarts; ++restart) {
    out.resize(4);
    ARDMA_ASSIGN_OR_RETURN(Header h, ReadHeader(ctx, header));
    // Resume at the cursor's node if it is still live; otherwise count from the head.
    uint64_t link = h.head, index = 0;
    if (LinkAddr(cursor.link) != 0) {
      ARDMA_ASSIGN_OR_RETURN(std::optional<Node> node, ReadNode(ctx, header, cursor.link));
      if (node && !node->removed()) {
        link = cursor.link;
        index = cursor.index;
      }
    }
    uint32_t n = 0;
    bool stale = false;
    while (LinkAddr(link) != 0 && n < max_items) {
      ARDMA_ASSIGN_OR_RETURN(std::optional<Node> node, ReadNode(ctx, header, link));
      if (!node) {
        stale = true;
        break;
      }
      if (!node->removed() && index >= cursor.index) {
        if (n > 0 && out.size() + 5 + node->length > max_bytes) break;
        ARDMA_ASSIGN_OR_RETURN(std::optional<ListValue> value, ReadValue(ctx, header, *node));
        if (!value) {
          stale = true;
          break;
        }
        EncodeValue(*value, &out);
        ++n;
      }
      if (!node->removed()) ++index;
      link = node->successor();
    }
    if (stale) continue;
    std::memcpy(out.data(), &n, 4);
    ByteWriter w(&out);
    w.U64(link);
    w.U64(index);
    w.U8(LinkAddr(link) == 0 ? 1 : 0);
    return out;
  }
  return TooManyRestarts();
}

}  // namespace ardma::list
