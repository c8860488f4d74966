// Moving lists between the servers of a cluster, for its rebalance (docs/cluster.md, "Moving
// slots"): what the mover runs, over one-sided operations, against the server a list's slot
// leaves and the server it goes to (the algorithm: list.h, "Moving a list").
#ifndef ARDMA_SERVICES_LIST_LIST_MOVER_H_
#define ARDMA_SERVICES_LIST_LIST_MOVER_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/client/client.h"
#include "services/list/list_format.h"

namespace ardma::list {

struct SealedList {
  std::string name;
  std::vector<ListValue> values;
};

// Seals the lists of `slots` on `giver` (their slots must be frozen there first) and reads them.
absl::StatusOr<std::vector<SealedList>> SealListsIn(Client& giver, const std::set<uint32_t>& slots);
// Adopts each of `lists` on `receiver`, not served until ServeListsIn.
absl::Status AdoptLists(Client& receiver, const std::vector<SealedList>& lists);
// Serves the lists of `slots` on `server` (unsealed), or stops serving them (sealed).
absl::Status ServeListsIn(Client& server, const std::set<uint32_t>& slots, bool served);

}  // namespace ardma::list

#endif  // ARDMA_SERVICES_LIST_LIST_MOVER_H_
