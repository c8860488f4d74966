#include "services/list/list.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/random64.h"
#include "services/root_cache.h"
#include "services/slot_check.h"

namespace ardma::list {
namespace {

using wire::ByteWriter;

constexpr uint64_t kAddrMask = ((1ull << 48) - 1) & ~15ull;
constexpr uint64_t kRemovedBit = 1;
constexpr uint64_t kSealedBit = 2;
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kHeadOffset = 8;
constexpr uint64_t kCountOffset = 16;
constexpr uint64_t kStateOffset = 24;
constexpr uint64_t kNotServed = 1;
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
  uint64_t state = 0;
  bool v1 = false;  // made before EndOf: its tails' next words may be plain 0
};

uint32_t SlotOfState(uint64_t state) { return static_cast<uint32_t>(state >> 1); }

// The list's header, served here or not.
absl::StatusOr<Header> ReadAnyHeader(Context& ctx, uint64_t header) {
  char bytes[kHeaderBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(header, std::span<char>(bytes, kHeaderBytes)));
  uint64_t magic;
  Header h;
  std::memcpy(&magic, bytes, 8);
  std::memcpy(&h.head, bytes + kHeadOffset, 8);
  std::memcpy(&h.count, bytes + kCountOffset, 8);
  std::memcpy(&h.state, bytes + kStateOffset, 8);
  h.v1 = magic == kHeaderMagicV1;
  if (magic != kHeaderMagic && !h.v1) {
    return StaleRootError(
        absl::InvalidArgumentError(absl::StrCat("no list header at address ", header)));
  }
  return h;
}

// The list's header; the redirect if the list is not served here (it moved away, or was adopted
// and is not served yet).
absl::StatusOr<Header> ReadHeader(Context& ctx, uint64_t header) {
  ARDMA_ASSIGN_OR_RETURN(Header h, ReadAnyHeader(ctx, header));
  if (h.state & kNotServed) return NotServedHere(ctx, SlotOfState(h.state));
  return h;
}

// The answer to a change that met a sealed word: the list is being moved (docs/cluster.md).
absl::Status Sealed(Context& ctx, uint64_t header) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t state, ctx.ReadU64(header + kStateOffset));
  return NotServedHere(ctx, SlotOfState(state));
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
  // Reached through a sealed word (a move is sealing the list): that word never changes.
  if (node.link & kSealedBit) return false;
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
// returns true to stop; prev_link is 0 for the first node. Returns false if the walk must restart
// (a node was freed under it), true when it stopped or reached the end.
template <typename Visit>
absl::StatusOr<bool> Walk(Context& ctx, uint64_t header, uint64_t head, uint64_t* index_out,
                          Visit visit) {
  uint64_t prev_link = 0;
  uint64_t link = head, index = 0;
  while (LinkAddr(link) != 0) {
    ARDMA_ASSIGN_OR_RETURN(std::optional<Node> node, ReadNode(ctx, header, link));
    if (!node) return false;
    if (node->removed()) {
      // Sealed words never change: pass a removed node that can no longer be unlinked.
      if (!(link & kSealedBit)) {
        ARDMA_ASSIGN_OR_RETURN(bool unlinked, Unlink(ctx, header, prev_link, *node));
        if (!unlinked) return false;
      }
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

// Allocates and fills a node holding `value`, linked to `next` (0: the end of a list). Returns its
// link.
absl::StatusOr<uint64_t> NewNode(Context& ctx, uint64_t header, const ListValue& value,
                                 uint64_t next = 0) {
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
  w.U64(next != 0 ? next : EndOf(link));
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

namespace {

// A new empty list published as root `root`; of racing creators one wins, and each returns the
// winner's header.
absl::StatusOr<uint64_t> Create(Context& ctx, const std::string& root) {
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

}  // namespace

absl::StatusOr<uint64_t> OpenByName(Context& ctx, std::string_view name, Use use) {
  ARDMA_RETURN_IF_ERROR(CheckName(name));
  std::string root = absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(name));
  absl::StatusOr<uint64_t> header = heap::GetRoot(ctx, root);
  if (absl::IsNotFound(header.status()) && use == Use::kCreate) header = Create(ctx, root);
  if (!header.ok() && !absl::IsNotFound(header.status())) return header;
  // Checked once the list exists (or is known not to): a mover freezes the slot before it lists
  // the lists to seal, so either it seals this one or this sees the freeze. (A list made where
  // the slot is not served is never used.)
  ARDMA_RETURN_IF_ERROR(
      CheckSlotServed(ctx, slots::SlotOf(kListSpace, name), /*write=*/use != Use::kRead));
  if (!header.ok()) return absl::NotFoundError(absl::StrCat("no list named '", ToAbsl(name), "'"));
  return header;
}

absl::StatusOr<uint64_t> Resolve(Context& ctx, const Target& target, Use use) {
  if (target.header != 0) return target.header;
  return OpenByName(ctx, target.name, use);
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
      if (cas.observed & kSealedBit) {
        heap::Free(ctx, LinkAddr(link)).IgnoreError();
        return Sealed(ctx, header);
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
    if (head & kSealedBit) {
      heap::Free(ctx, LinkAddr(link)).IgnoreError();
      return Sealed(ctx, header);
    }
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
                 if (node.next & kSealedBit) return Sealed(ctx, header);
                 // The linearization point: mark the node's own link word.
                 ARDMA_ASSIGN_OR_RETURN(
                     CasResult mark,
                     ctx.CompareAndSwap(LinkAddr(node.link), node.next, node.next | kRemovedBit));
                 if (mark.observed & kSealedBit) return Sealed(ctx, header);
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

// ---- Moving ----

namespace {

// The list's sealed link words in list order: the header's head word, then each node's next
// word, up to the first that is not sealed (a seal cut short) or the end. Sealed words never
// change, and a node that hangs from one is never freed, so nothing moves under this walk.
absl::StatusOr<std::vector<uint64_t>> SealedWords(Context& ctx, uint64_t header) {
  std::vector<uint64_t> words;
  for (uint64_t word = header + kHeadOffset;;) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t link, ctx.ReadU64(word));
    if (!(link & kSealedBit)) return words;
    words.push_back(word);
    if (LinkAddr(link) == 0) return words;
    word = LinkAddr(link);
  }
}

}  // namespace

absl::Status Seal(Context& ctx, uint64_t header, uint32_t slot) {
  ARDMA_ASSIGN_OR_RETURN(Header h, ReadAnyHeader(ctx, header));
  ARDMA_RETURN_IF_ERROR(
      ctx.WriteU64(header + kStateOffset, uint64_t{slot} << 1 | (h.state & kNotServed)));
  // In list order, so every node reached hangs from a sealed word: nobody can unlink (and free) it.
  uint64_t word = header + kHeadOffset;
  for (uint64_t step = 0;; ++step) {
    if (step > kMaxRestarts + 4 * h.count) return TooManyRestarts();
    ARDMA_ASSIGN_OR_RETURN(uint64_t link, ctx.ReadU64(word));
    if (!(link & kSealedBit)) {
      ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(word, link, link | kSealedBit));
      if (!cas.swapped) continue;  // it changed (an append, a remove): seal what it says now
    }
    if (LinkAddr(link) == 0) return absl::OkStatus();
    word = LinkAddr(link);
  }
}

absl::StatusOr<std::vector<ListValue>> Values(Context& ctx, uint64_t header) {
  ARDMA_ASSIGN_OR_RETURN(Header h, ReadAnyHeader(ctx, header));
  if (!(h.head & kSealedBit)) return absl::FailedPreconditionError("list: not sealed");
  std::vector<ListValue> values;
  for (uint64_t link = h.head; LinkAddr(link) != 0;) {
    ARDMA_ASSIGN_OR_RETURN(std::optional<Node> node, ReadNode(ctx, header, link));
    if (!node) return absl::DataLossError("list: a node of a sealed list is gone");
    if (!node->removed()) {
      ARDMA_ASSIGN_OR_RETURN(std::optional<ListValue> value, ReadValue(ctx, header, *node));
      if (!value) return absl::DataLossError("list: a node of a sealed list is gone");
      values.push_back(*std::move(value));
    }
    link = node->next;
  }
  return values;
}

absl::Status Unseal(Context& ctx, uint64_t header) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> words, SealedWords(ctx, header));
  // From the end: a node's predecessor is unsealed last, so no node is unlinked (and freed) while
  // the walk still has to pass it.
  for (auto it = words.rbegin(); it != words.rend(); ++it) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t link, ctx.ReadU64(*it));
    if (link & kSealedBit) {
      ARDMA_RETURN_IF_ERROR(ctx.CompareAndSwap(*it, link, link & ~kSealedBit).status());
    }
  }
  return absl::OkStatus();
}

absl::Status SetServed(Context& ctx, uint64_t header, bool served) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t state, ctx.ReadU64(header + kStateOffset));
  return ctx.WriteU64(header + kStateOffset, served ? state & ~kNotServed : state | kNotServed);
}

absl::StatusOr<uint64_t> Adopt(Context& ctx, std::string_view name, uint32_t slot,
                               const std::vector<ListValue>& values) {
  ARDMA_RETURN_IF_ERROR(CheckName(name));
  const uint64_t not_served = uint64_t{slot} << 1 | kNotServed;
  std::string root = absl::StrCat(ToAbsl(kRootPrefix), ToAbsl(name));
  absl::StatusOr<uint64_t> header = heap::GetRoot(ctx, root);
  std::vector<uint64_t> old_nodes;
  if (header.ok()) {
    // A list of that name left here: one that moved away before (sealed), or one made while the
    // slot was not served here (never changed). Not served from now until SetServed.
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(*header + kStateOffset, not_served));
    // Its nodes (sealed ones; one never used has none) go once the new ones are in.
    ARDMA_ASSIGN_OR_RETURN(old_nodes, SealedWords(ctx, *header));
    if (!old_nodes.empty()) old_nodes.erase(old_nodes.begin());
  } else if (absl::IsNotFound(header.status())) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t made, heap::Allocate(ctx, kHeaderBytes));
    std::string bytes;
    ByteWriter w(&bytes);
    for (uint64_t word : {kHeaderMagic, uint64_t{0}, uint64_t{0}, not_served}) w.U64(word);
    ARDMA_RETURN_IF_ERROR(ctx.Write(made, bytes));
    ARDMA_ASSIGN_OR_RETURN(header, heap::GetOrCreateRoot(ctx, root, made));
    if (*header != made) {  // someone made one meanwhile: adopt into theirs
      ARDMA_RETURN_IF_ERROR(heap::Free(ctx, made));
      return Adopt(ctx, name, slot, values);
    }
  } else {
    return header.status();
  }
  // The nodes from the last, each linked to the one after it; then the header names the first.
  uint64_t next = 0;
  for (auto it = values.rbegin(); it != values.rend(); ++it) {
    ARDMA_ASSIGN_OR_RETURN(next, NewNode(ctx, *header, *it, next));
  }
  char counts[16];
  uint64_t n = values.size();
  std::memcpy(counts, &next, 8);
  std::memcpy(counts + 8, &n, 8);
  ARDMA_RETURN_IF_ERROR(ctx.Write(*header + kHeadOffset, std::string_view(counts, 16)));
  for (uint64_t node : old_nodes) {
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(node + 8, 0));  // poison its tag, as an unlink does
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, node));
  }
  return *header;
}

}  // namespace ardma::list
