#include "services/slot_check.h"

#include <optional>
#include <span>

#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"

namespace ardma {

absl::Status CheckSlotServed(Context& ctx, uint32_t slot, bool write) {
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> fence, heap::FindRoot(ctx, slots::kFenceRoot));
  if (!fence) return absl::OkStatus();
  return CheckSlotServedAt(ctx, *fence, slot, write);
}

absl::Status CheckSlotServedAt(Context& ctx, uint64_t fence, uint32_t slot, bool write) {
  uint64_t words[2];
  ARDMA_RETURN_IF_ERROR(ctx.Read(slots::FenceEntry(fence, slot),
                                 std::span<char>(reinterpret_cast<char*>(words), sizeof(words))));
  return ctx.CheckSlot(slot, words[0], words[1], write);
}

absl::Status NotServedHere(Context& ctx, uint32_t slot) {
  ARDMA_RETURN_IF_ERROR(CheckSlotServed(ctx, slot, /*write=*/true));
  return slots::RedirectStatus({.frozen = true, .slot = slot});
}

}  // namespace ardma
