// Whether a cluster member serves a key's slot, for service code that runs on the server or, in
// RDMA mode, on a client (docs/cluster.md, "The fence"). Outside a cluster (no fence) every slot
// is served. The DHT reads the fence itself (with its entry cached by RDMA-mode clients); the lock
// and list services use these.
#ifndef ARDMA_SERVICES_SLOT_CHECK_H_
#define ARDMA_SERVICES_SLOT_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/context/context.h"

namespace ardma {

// OK if this server serves `slot` (owned; or frozen, for a read); else the redirect
// (slots::RedirectOf).
absl::Status CheckSlotServed(Context& ctx, uint32_t slot, bool write);
// The same with the fence root already looked up (heap::FindRoot of slots::kFenceRoot).
absl::Status CheckSlotServedAt(Context& ctx, uint64_t fence, uint32_t slot, bool write);

// The answer for a key of `slot` whose data here is sealed or handed over: the redirect the fence
// gives, or, while the fence still says the slot is served here (a move is starting, ending or
// was undone), a frozen one: come back shortly.
absl::Status NotServedHere(Context& ctx, uint32_t slot);

}  // namespace ardma

#endif  // ARDMA_SERVICES_SLOT_CHECK_H_
