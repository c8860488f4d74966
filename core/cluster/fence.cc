#include "core/cluster/fence.h"

#include <cstring>
#include <span>

#include "absl/strings/numbers.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"

namespace ardma::cluster {
namespace {

constexpr uint64_t kChunk = 64 << 10;  // bytes a READ or WRITE of the fence moves at once

// The whole fence: kSlots entries.
absl::StatusOr<std::string> ReadAll(Context& ctx, uint64_t fence) {
  std::string bytes(slots::kFenceBytes, '\0');
  for (uint64_t at = 0; at < bytes.size(); at += kChunk) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(fence + at, std::span<char>(bytes).subspan(at, kChunk)));
  }
  return bytes;
}

uint64_t WordAt(const std::string& fence_bytes, uint32_t slot) {
  uint64_t word;
  std::memcpy(&word, fence_bytes.data() + slot * slots::kFenceEntryBytes, 8);
  return word;
}

}  // namespace

absl::StatusOr<uint64_t> OpenFence(Context& ctx) {
  absl::StatusOr<uint64_t> fence = heap::GetRoot(ctx, slots::kFenceRoot);
  if (!absl::IsNotFound(fence.status())) return fence;
  ARDMA_ASSIGN_OR_RETURN(uint64_t fresh, heap::Allocate(ctx, slots::kFenceBytes));
  const std::string zeros(kChunk, '\0');
  for (uint64_t at = 0; at < slots::kFenceBytes; at += kChunk) {
    ARDMA_RETURN_IF_ERROR(ctx.Write(fresh + at, zeros));
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t published, heap::GetOrCreateRoot(ctx, slots::kFenceRoot, fresh));
  if (published != fresh) ARDMA_RETURN_IF_ERROR(heap::Free(ctx, fresh));  // another made it first
  return published;
}

absl::Status AdoptSlots(Context& ctx, const SlotMap& map, const std::string& self) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t fence, OpenFence(ctx));
  ARDMA_ASSIGN_OR_RETURN(std::string bytes, ReadAll(ctx, fence));
  const uint64_t owned = slots::FenceWord(slots::SlotState::kOwned, map.epoch());
  // An owned slot's word 1 says whether its writes go to replicas (core/slots.h).
  const bool replicated = map.Replicated();
  const uint64_t mark = map.ReplicatesWritesOf(self) ? slots::kReplicatedMark : 0;
  for (const SlotRange& range : map.ranges()) {
    if (range.server != self) {
      // Failover gave the slots of this member to its replica (this member was fenced by then):
      // it serves them no more. (A mover marks the slots it moves itself, before the map.)
      if (!replicated) continue;
      const uint64_t moved = slots::FenceWord(slots::SlotState::kMoved, map.epoch());
      for (uint32_t slot = range.first; slot <= range.last; ++slot) {
        const uint64_t word = WordAt(bytes, slot);
        if (slots::StateOf(word) != slots::SlotState::kOwned) continue;
        const uint64_t entry = slots::FenceEntry(fence, slot);
        // (The state first: an owned slot with another word 1 would take unreplicated writes.)
        ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(entry, word, moved));
        if (cas.swapped) ARDMA_RETURN_IF_ERROR(ctx.WriteU64(entry + 8, IdWord(range.server)));
      }
      continue;
    }
    for (uint32_t slot = range.first; slot <= range.last; ++slot) {
      uint64_t word = WordAt(bytes, slot);
      const uint64_t entry = slots::FenceEntry(fence, slot);
      uint64_t word1;
      std::memcpy(&word1, bytes.data() + slot * slots::kFenceEntryBytes + 8, 8);
      // Failover gives back slots it once took from this member (marked moved above): taken.
      const bool taken_back = replicated && slots::StateOf(word) == slots::SlotState::kMoved;
      if (slots::StateOf(word) == slots::SlotState::kNotOwned || taken_back) {
        // Word 1 first: a slot that is owned must never show a word 1 without the mark, or a
        // write could slip through unreplicated.
        if (word1 != mark) ARDMA_RETURN_IF_ERROR(ctx.WriteU64(entry + 8, mark));
        word1 = mark;
        // A CAS: a mover may be writing this word (importing the slot here) at the same time.
        ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(entry, word, owned));
        if (!cas.swapped) continue;
        word = owned;
      }
      if (slots::StateOf(word) == slots::SlotState::kOwned && word1 != mark) {
        ARDMA_RETURN_IF_ERROR(ctx.WriteU64(entry + 8, mark));
      }
    }
  }
  return absl::OkStatus();
}

uint64_t IdWord(const std::string& id) {
  uint64_t word = 0;
  if (id.size() != 16 || !absl::SimpleHexAtoi(id, &word)) return 0;
  return word;
}

absl::StatusOr<std::vector<uint64_t>> ReadFence(Context& ctx, uint64_t fence,
                                                const std::vector<uint32_t>& slots) {
  ARDMA_ASSIGN_OR_RETURN(std::string bytes, ReadAll(ctx, fence));
  std::vector<uint64_t> words;
  words.reserve(slots.size());
  for (uint32_t slot : slots) words.push_back(WordAt(bytes, slot));
  return words;
}

absl::Status WriteFence(Context& ctx, uint64_t fence, const std::vector<uint32_t>& slots,
                        uint64_t word, uint64_t owner) {
  // Contiguous runs of slots in one WRITE each.
  for (size_t i = 0; i < slots.size();) {
    size_t j = i + 1;
    while (j < slots.size() && slots[j] == slots[j - 1] + 1 &&
           (j - i) * slots::kFenceEntryBytes < kChunk) {
      ++j;
    }
    std::string entries;
    for (size_t k = i; k < j; ++k) {
      entries.append(reinterpret_cast<const char*>(&word), 8);
      entries.append(reinterpret_cast<const char*>(&owner), 8);
    }
    ARDMA_RETURN_IF_ERROR(ctx.Write(slots::FenceEntry(fence, slots[i]), entries));
    i = j;
  }
  return absl::OkStatus();
}

}  // namespace ardma::cluster
