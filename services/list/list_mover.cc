#include "services/list/list_mover.h"

#include <utility>

#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "services/list/list.h"
#include "services/list/list_client.h"

namespace ardma::list {
namespace {

struct Found {
  std::string name;
  uint64_t header = 0;
};

// The lists `ctx`'s server holds whose slots are in `slots`.
absl::StatusOr<std::vector<Found>> ListsIn(Context& ctx, const std::set<uint32_t>& slots) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> roots, heap::ListRoots(ctx, kRootPrefix));
  std::vector<Found> found;
  for (const std::string& root : roots) {
    std::string name = root.substr(kRootPrefix.size());
    if (!slots.contains(slots::SlotOf(kListSpace, name))) continue;
    ARDMA_ASSIGN_OR_RETURN(uint64_t header, heap::GetRoot(ctx, root));
    found.push_back({std::move(name), header});
  }
  return found;
}

}  // namespace

absl::StatusOr<std::vector<SealedList>> SealListsIn(Client& giver,
                                                    const std::set<uint32_t>& slots) {
  RemoteContext ctx(&giver, {&active_libraries::list()});
  ARDMA_ASSIGN_OR_RETURN(std::vector<Found> lists, ListsIn(ctx, slots));
  std::vector<SealedList> sealed;
  for (Found& list : lists) {
    ARDMA_RETURN_IF_ERROR(Seal(ctx, list.header, slots::SlotOf(kListSpace, list.name)));
    ARDMA_ASSIGN_OR_RETURN(std::vector<ListValue> values, Values(ctx, list.header));
    sealed.push_back({std::move(list.name), std::move(values)});
  }
  return sealed;
}

absl::Status AdoptLists(Client& receiver, const std::vector<SealedList>& lists) {
  RemoteContext ctx(&receiver, {&active_libraries::list()});
  for (const SealedList& list : lists) {
    ARDMA_RETURN_IF_ERROR(
        Adopt(ctx, list.name, slots::SlotOf(kListSpace, list.name), list.values).status());
  }
  return absl::OkStatus();
}

absl::Status ServeListsIn(Client& server, const std::set<uint32_t>& slots, bool served) {
  RemoteContext ctx(&server, {&active_libraries::list()});
  ARDMA_ASSIGN_OR_RETURN(std::vector<Found> lists, ListsIn(ctx, slots));
  for (const Found& list : lists) {
    if (served) {
      ARDMA_RETURN_IF_ERROR(Unseal(ctx, list.header));
      ARDMA_RETURN_IF_ERROR(SetServed(ctx, list.header, true));
    } else {
      ARDMA_RETURN_IF_ERROR(Seal(ctx, list.header, slots::SlotOf(kListSpace, list.name)));
      ARDMA_RETURN_IF_ERROR(SetServed(ctx, list.header, false));
    }
  }
  return absl::OkStatus();
}

}  // namespace ardma::list
