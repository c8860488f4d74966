// Named roots (heap.h): a fixed table in the heap's header, probed by name hash.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"

namespace ardma::heap {
namespace {

constexpr uint64_t kPhaseClaiming = 1;
constexpr uint64_t kPhaseReady = 2;
constexpr int kMaxCasRetries = 1 << 20;
// A root being created is normally published a few operations later. Waiting for it backs off
// from 1 us to 1 ms, for about a second in all, then gives up: its creator may have died between
// claiming the slot and publishing it.
constexpr int kMaxClaimedWaits = 1000;

absl::Status WaitForClaimedRoot(Context& ctx, std::string_view name, int* waits) {
  if (++*waits > kMaxClaimedWaits) {
    return absl::UnavailableError(absl::StrCat("root '", ToAbsl(name),
                                               "' is still being created by a client that has "
                                               "not finished (it may have died)"));
  }
  return ctx.Backoff(*waits);
}

// FNV-1a folded to 48 bits; never 0 so a claimed state word is never "empty".
uint64_t NameHash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  h &= (1ull << 48) - 1;
  return h == 0 ? 1 : h;
}

absl::Status CheckRootName(std::string_view name) {
  if (name.empty() || name.size() > kMaxRootName || name.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("root names are 1 to ", kMaxRootName, " bytes without NUL"));
  }
  return absl::OkStatus();
}

uint64_t RootAddr(int slot) { return kRootsOffset + kRootSize * static_cast<uint64_t>(slot); }

struct RootSlot {
  uint64_t state;
  uint64_t value;
  std::string_view name;  // NUL padding stripped
};

RootSlot ParseSlot(std::string_view table, int slot) {
  const char* p = table.data() + kRootSize * slot;
  RootSlot s;
  std::memcpy(&s.state, p, 8);
  std::memcpy(&s.value, p + 8, 8);
  s.name = std::string_view(p + 16, strnlen(p + 16, 48));
  return s;
}

enum class Lookup { kFound, kAbsent, kClaimed };

// Probes the root table for `name`. kFound sets *slot to the ready slot; kAbsent sets *slot to the
// first empty slot on the probe path (or -1 if the table is full); kClaimed means a slot with this
// name's hash is being created right now: the caller reads again.
Lookup Probe(std::string_view table, std::string_view name, uint64_t hash, int* slot) {
  int start = static_cast<int>(hash % kNumRoots);
  for (int i = 0; i < kNumRoots; ++i) {
    int s = (start + i) % kNumRoots;
    RootSlot r = ParseSlot(table, s);
    if (r.state == 0) {
      *slot = s;
      return Lookup::kAbsent;
    }
    if ((r.state >> 16) != hash) continue;
    if ((r.state & 0xffff) != kPhaseReady) {
      *slot = s;
      return Lookup::kClaimed;
    }
    if (r.name == name) {
      *slot = s;
      return Lookup::kFound;
    }
  }
  *slot = -1;
  return Lookup::kAbsent;
}

// The root table as one READ saw it. Where memory is local it is a view, not a copy: every
// service call by name looks its root up, so this is on the hot path of active code.
struct RootTable {
  std::string copy;
  std::string_view bytes;
};

absl::StatusOr<RootTable> ReadRootTable(Context& ctx) {
  RootTable t;
  if (ctx.IsLocal()) {
    ARDMA_ASSIGN_OR_RETURN(t.bytes, ctx.View(kRootsOffset, kRootSize * kNumRoots));
  } else {
    ARDMA_ASSIGN_OR_RETURN(t.copy, ctx.Read(kRootsOffset, kRootSize * kNumRoots));
    t.bytes = t.copy;
  }
  return t;
}

}  // namespace

absl::StatusOr<uint64_t> RootValueAddress(Context& ctx, std::string_view name) {
  ARDMA_RETURN_IF_ERROR(CheckRootName(name));
  uint64_t hash = NameHash(name);
  for (int waits = 0;;) {
    ARDMA_ASSIGN_OR_RETURN(RootTable root_table, ReadRootTable(ctx));
    std::string_view table = root_table.bytes;
    int slot;
    switch (Probe(table, name, hash, &slot)) {
      case Lookup::kFound:
        return RootAddr(slot) + 8;
      case Lookup::kAbsent:
        return absl::NotFoundError(absl::StrCat("no root named '", ToAbsl(name), "'"));
      case Lookup::kClaimed:
        ARDMA_RETURN_IF_ERROR(WaitForClaimedRoot(ctx, name, &waits));  // then read again
        break;
    }
  }
}

absl::StatusOr<uint64_t> GetRoot(Context& ctx, std::string_view name) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, RootValueAddress(ctx, name));
  return ctx.ReadU64(addr);
}

absl::StatusOr<uint64_t> GetOrCreateRoot(Context& ctx, std::string_view name, uint64_t initial) {
  ARDMA_RETURN_IF_ERROR(CheckRootName(name));
  uint64_t hash = NameHash(name);
  int waits = 0;
  for (int attempt = 0; attempt < kMaxCasRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(RootTable root_table, ReadRootTable(ctx));
    std::string_view table = root_table.bytes;
    int slot;
    Lookup found = Probe(table, name, hash, &slot);
    if (found == Lookup::kFound) return ParseSlot(table, slot).value;
    if (found == Lookup::kClaimed) {
      ARDMA_RETURN_IF_ERROR(WaitForClaimedRoot(ctx, name, &waits));
      continue;
    }
    if (slot < 0) return absl::ResourceExhaustedError("the root table is full");
    uint64_t addr = RootAddr(slot);
    ARDMA_ASSIGN_OR_RETURN(CasResult claim,
                           ctx.CompareAndSwap(addr, 0, hash << 16 | kPhaseClaiming));
    if (!claim.swapped) continue;  // someone took this slot: probe again
    char body[kRootSize - 8] = {};
    std::memcpy(body, &initial, 8);
    std::memcpy(body + 8, name.data(), name.size());
    ARDMA_RETURN_IF_ERROR(ctx.Write(addr + 8, std::string_view(body, sizeof(body))));
    ARDMA_ASSIGN_OR_RETURN(CasResult publish, ctx.CompareAndSwap(addr, hash << 16 | kPhaseClaiming,
                                                                 hash << 16 | kPhaseReady));
    if (!publish.swapped) return absl::DataLossError("root slot changed while being created");
    return initial;
  }
  return absl::AbortedError("root creation lost too many races");
}

absl::StatusOr<CasResult> CompareAndSetRoot(Context& ctx, std::string_view name, uint64_t expected,
                                            uint64_t desired) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, RootValueAddress(ctx, name));
  return ctx.CompareAndSwap(addr, expected, desired);
}

}  // namespace ardma::heap
