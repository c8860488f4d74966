#include "services/lock/lock_mover.h"

#include <algorithm>
#include <map>

#include "core/client/remote_context.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "services/dht/dht_mover.h"
#include "services/lock/lock_client.h"

namespace ardma::lock {
namespace {

constexpr absl::Duration kDrainPoll = absl::Milliseconds(2);

}  // namespace

absl::StatusOr<std::vector<std::string>> LocksIn(Client& server, const std::set<uint32_t>& slots) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> tables, dht::TablesOn(server));
  std::vector<std::string> names;
  if (std::find(tables.begin(), tables.end(), kTable) == tables.end()) return names;
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> all, dht::KeysOf(server, std::string(kTable)));
  for (std::string& name : all) {
    if (slots.contains(slots::SlotOf(kLockSpace, name))) names.push_back(std::move(name));
  }
  return names;
}

absl::StatusOr<std::vector<SealedLock>> SealWhenFree(Client& giver, const std::set<uint32_t>& slots,
                                                     absl::Time deadline,
                                                     std::set<uint32_t>* busy) {
  RemoteContext ctx(&giver, {&active_libraries::lock()});
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> names, LocksIn(giver, slots));
  std::vector<SealedLock> waiting, free;
  for (const std::string& name : names) {
    ARDMA_ASSIGN_OR_RETURN(SealedLock sealed, Seal(ctx, name));
    waiting.push_back(std::move(sealed));
  }
  std::map<uint64_t, LeaseWatch> watches;  // by block address
  while (!waiting.empty()) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      ARDMA_ASSIGN_OR_RETURN(bool drained, Drained(ctx, *it, watches[it->addr]));
      if (drained) {
        free.push_back(std::move(*it));
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    if (waiting.empty() || absl::Now() >= deadline) break;
    absl::SleepFor(kDrainPoll);
  }
  for (const SealedLock& lock : waiting) busy->insert(slots::SlotOf(kLockSpace, lock.name));
  if (busy->empty()) return free;
  ARDMA_RETURN_IF_ERROR(UnsealIn(giver, *busy));
  std::erase_if(free, [&](const SealedLock& lock) {
    return busy->contains(slots::SlotOf(kLockSpace, lock.name));
  });
  return free;
}

absl::Status AdoptAll(Client& receiver, const std::vector<SealedLock>& locks) {
  RemoteContext ctx(&receiver, {&active_libraries::lock()});
  for (const SealedLock& lock : locks) ARDMA_RETURN_IF_ERROR(Adopt(ctx, lock).status());
  return absl::OkStatus();
}

absl::Status UnsealIn(Client& server, const std::set<uint32_t>& slots) {
  RemoteContext ctx(&server, {&active_libraries::lock()});
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> names, LocksIn(server, slots));
  for (const std::string& name : names) {
    ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> addr, Find(ctx, name));
    if (addr) ARDMA_RETURN_IF_ERROR(Unseal(ctx, *addr));
  }
  return absl::OkStatus();
}

absl::Status SealIn(Client& server, const std::set<uint32_t>& slots) {
  RemoteContext ctx(&server, {&active_libraries::lock()});
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> names, LocksIn(server, slots));
  for (const std::string& name : names) ARDMA_RETURN_IF_ERROR(Seal(ctx, name).status());
  return absl::OkStatus();
}

}  // namespace ardma::lock
