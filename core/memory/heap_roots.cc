// Named roots (heap.h): a hash directory whose bucket array is part of the heap's layout and whose
// entries are heap blocks, pushed onto their bucket's chain with one CAS once fully written.
#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/memory/heap_layout.h"
#include "core/status_macros.h"

namespace ardma::heap {
namespace {

using internal::Layout;

constexpr uint64_t kReady = 2;
constexpr uint64_t kDeleted = 3;
constexpr uint64_t kEntryHeader = 32;  // next, state, value, name length
constexpr int kMaxCasRetries = 1 << 20;
// Longer chains than this mean a corrupted (cyclic) chain, not a long one.
constexpr int kMaxChain = 1 << 24;

absl::Status CheckRootName(std::string_view name) {
  if (name.empty() || name.size() > kMaxRootName || name.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("root names are 1 to ", kMaxRootName, " bytes without NUL"));
  }
  return absl::OkStatus();
}

struct Name {
  std::string_view text;
  uint64_t hash;    // FNV-1a
  uint64_t tag;     // what the entry's state keeps of it: 48 bits, never 0
  uint64_t bucket;  // address of its bucket's head word
};

uint64_t NameHash(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}
uint64_t NameTag(uint64_t hash) { return (hash >> 16) == 0 ? 1 : (hash >> 16); }

absl::StatusOr<Name> Prepare(Context& ctx, std::string_view text, Layout* layout) {
  ARDMA_RETURN_IF_ERROR(CheckRootName(text));
  ARDMA_ASSIGN_OR_RETURN(*layout, internal::ReadLayout(ctx, /*with_slots=*/false));
  Name n{text, NameHash(text), 0, 0};
  n.tag = NameTag(n.hash);
  n.bucket = layout->dir + 8 * (n.hash & (layout->buckets - 1));
  return n;
}

uint64_t State(uint64_t tag, uint64_t phase) { return tag << 16 | phase; }

struct Entry {
  uint64_t addr = 0;
  uint64_t state = 0;
  uint64_t value = 0;
};

// Walks the chain from `head` for a live entry named `name`.
absl::StatusOr<std::optional<Entry>> Find(Context& ctx, const Name& name, uint64_t head) {
  std::string copy;
  for (int hops = 0; head != 0; ++hops) {
    if (hops > kMaxChain) return absl::DataLossError("the root directory has a cyclic chain");
    uint64_t len = kEntryHeader + name.text.size();
    std::string_view bytes;
    if (ctx.IsLocal()) {
      ARDMA_ASSIGN_OR_RETURN(bytes, ctx.View(head, len));
    } else {
      ARDMA_ASSIGN_OR_RETURN(copy, ctx.Read(head, len));
      bytes = copy;
    }
    uint64_t w[4];
    std::memcpy(w, bytes.data(), sizeof(w));
    if (w[1] == State(name.tag, kReady) && w[3] == name.text.size() &&
        bytes.substr(kEntryHeader) == name.text) {
      return Entry{head, w[1], w[2]};
    }
    head = w[0];
  }
  return std::nullopt;
}

// The live entry named `text`, if there is one.
absl::StatusOr<std::optional<Entry>> Look(Context& ctx, std::string_view text) {
  Layout layout;
  ARDMA_ASSIGN_OR_RETURN(Name name, Prepare(ctx, text, &layout));
  ARDMA_ASSIGN_OR_RETURN(uint64_t head, ctx.ReadU64(name.bucket));
  return Find(ctx, name, head);
}

absl::StatusOr<Entry> FindOrNotFound(Context& ctx, std::string_view text) {
  ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, Look(ctx, text));
  if (!e) return absl::NotFoundError(absl::StrCat("no root named '", ToAbsl(text), "'"));
  return *e;
}

}  // namespace

namespace internal {

absl::Status CheckDirectory(Context& ctx, const Layout& l) {
  const uint64_t data_end = kDataStart + l.pages * kPageSize;
  absl::flat_hash_set<uint64_t> seen;
  for (uint64_t b = 0; b < l.buckets; ++b) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t entry, ctx.ReadU64(l.dir + 8 * b));
    while (entry != 0) {
      auto damaged = [&](std::string_view what) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the heap's root directory is damaged: bucket ", b, " (offset ", l.dir + 8 * b,
            ") leads to ", entry, ", ", ToAbsl(what),
            "; refusing to start on it (nothing was written). Restore the file from a copy, or "
            "start with --format to erase it"));
      };
      if (entry < kDataStart || entry + kEntryHeader > data_end || entry % 16 != 0) {
        return damaged("outside the data pages");
      }
      if (!seen.insert(entry).second) return damaged("an entry already on a chain (a cycle)");
      ARDMA_ASSIGN_OR_RETURN(std::string head, ctx.Read(entry, kEntryHeader));
      uint64_t w[4];
      std::memcpy(w, head.data(), sizeof(w));
      uint64_t phase = w[1] & 0xffff;
      if ((phase != kReady && phase != kDeleted) || w[3] == 0 || w[3] > kMaxRootName ||
          entry + kEntryHeader + w[3] > data_end) {
        return damaged("which is no root entry");
      }
      ARDMA_ASSIGN_OR_RETURN(std::string name, ctx.Read(entry + kEntryHeader, w[3]));
      uint64_t hash = NameHash(name);
      if ((w[1] >> 16) != NameTag(hash) || (hash & (l.buckets - 1)) != b) {
        return damaged("an entry whose name does not hash to it");
      }
      entry = w[0];
    }
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<std::vector<std::string>> ListRoots(Context& ctx, std::string_view prefix) {
  ARDMA_ASSIGN_OR_RETURN(Layout layout, internal::ReadLayout(ctx));
  std::string heads(8 * layout.buckets, '\0');
  constexpr size_t kChunk = 64 << 10;  // within any wire frame
  for (size_t at = 0; at < heads.size(); at += kChunk) {
    size_t n = std::min(kChunk, heads.size() - at);
    ARDMA_RETURN_IF_ERROR(ctx.Read(layout.dir + at, std::span<char>(heads).subspan(at, n)));
  }
  std::vector<std::string> names;
  for (uint64_t b = 0; b < layout.buckets; ++b) {
    uint64_t entry;
    std::memcpy(&entry, heads.data() + 8 * b, 8);
    for (int hops = 0; entry != 0; ++hops) {
      if (hops > kMaxChain) return absl::DataLossError("the root directory has a cyclic chain");
      ARDMA_ASSIGN_OR_RETURN(std::string head, ctx.Read(entry, kEntryHeader));
      uint64_t w[4];
      std::memcpy(w, head.data(), sizeof(w));
      if ((w[1] & 0xffff) == kReady && w[3] >= prefix.size() && w[3] <= kMaxRootName) {
        ARDMA_ASSIGN_OR_RETURN(std::string name, ctx.Read(entry + kEntryHeader, w[3]));
        if (name.starts_with(prefix)) names.push_back(std::move(name));
      }
      entry = w[0];
    }
  }
  return names;
}

absl::StatusOr<uint64_t> RootValueAddress(Context& ctx, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(Entry e, FindOrNotFound(ctx, name));
  return e.addr + 16;
}

absl::StatusOr<uint64_t> GetRoot(Context& ctx, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, RootValueAddress(ctx, name));
  return ctx.ReadU64(addr);  // now, not as the walk saw it: CompareAndSetRoot may have moved it
}

absl::StatusOr<std::optional<uint64_t>> FindRoot(Context& ctx, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, Look(ctx, name));
  if (!e) return std::nullopt;
  return ctx.ReadU64(e->addr + 16);  // as GetRoot
}

absl::StatusOr<uint64_t> GetOrCreateRoot(Context& ctx, std::string_view text, uint64_t initial) {
  Layout layout;
  ARDMA_ASSIGN_OR_RETURN(Name name, Prepare(ctx, text, &layout));
  uint64_t mine = 0;  // our entry, written once, relinked on every retry
  auto drop_mine = [&ctx, &mine] {
    if (mine != 0) Free(ctx, mine).IgnoreError();
  };
  for (int attempt = 0; attempt < kMaxCasRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t head, ctx.ReadU64(name.bucket));
    absl::StatusOr<std::optional<Entry>> found = Find(ctx, name, head);
    if (!found.ok() || found->has_value()) {
      drop_mine();
      if (!found.ok()) return found.status();
      return ctx.ReadU64((*found)->addr + 16);
    }
    if (mine == 0) {
      ARDMA_ASSIGN_OR_RETURN(mine, Allocate(ctx, kEntryHeader + text.size()));
      std::string entry(kEntryHeader, '\0');
      uint64_t w[4] = {head, State(name.tag, kReady), initial, text.size()};
      std::memcpy(entry.data(), w, sizeof(w));
      entry.append(text);
      if (absl::Status s = ctx.Write(mine, entry); !s.ok()) {
        drop_mine();
        return s;
      }
    } else if (absl::Status s = ctx.WriteU64(mine, head); !s.ok()) {
      drop_mine();
      return s;
    }
    // Published whole: the entry is complete before the bucket points at it.
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(name.bucket, head, mine));
    if (cas.swapped) return initial;
  }
  drop_mine();
  return absl::AbortedError("root creation lost too many races");
}

absl::StatusOr<CasResult> CompareAndSetRoot(Context& ctx, std::string_view name, uint64_t expected,
                                            uint64_t desired) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, RootValueAddress(ctx, name));
  return ctx.CompareAndSwap(addr, expected, desired);
}

absl::Status DeleteRoot(Context& ctx, std::string_view name) {
  for (int attempt = 0; attempt < kMaxCasRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Entry e, FindOrNotFound(ctx, name));
    ARDMA_ASSIGN_OR_RETURN(
        CasResult cas, ctx.CompareAndSwap(e.addr + 8, e.state, (e.state & ~0xffffull) | kDeleted));
    if (cas.swapped) return absl::OkStatus();
  }
  return absl::AbortedError("root deletion lost too many races");
}

}  // namespace ardma::heap
