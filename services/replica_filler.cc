#include "services/replica_filler.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/cluster/fence.h"
#include "core/log.h"
#include "core/memory/heap.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_mover.h"
#include "services/dht/dht_mover.h"
#include "services/lock/lock_format.h"

namespace ardma {
namespace {

constexpr size_t kFillBatch = 2048;  // slots frozen at once while they are copied
constexpr absl::Duration kFillWait = absl::Seconds(10);

// The tables a fill copies: the hash tables' (the lock service's and the file systems' own do not
// take replicated writes yet).
absl::StatusOr<std::vector<std::string>> TablesToFill(Client& self) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> tables, dht::TablesOn(self));
  std::erase_if(tables, [](const std::string& t) {
    return t == lock::kTable || dfs::IsFileSystemTable(t);
  });
  return tables;
}

}  // namespace

ReplicaFiller::ReplicaFiller(ReplicaFillerOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

ReplicaFiller::~ReplicaFiller() { Stop(); }

void ReplicaFiller::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  options_.replication->Wake();
  if (thread_.joinable()) thread_.join();
}

void ReplicaFiller::Run() {
  uint64_t changes = 0;  // as NextFill last saw them
  while (!stop_.HasBeenNotified()) {
    const absl::Status turn = options_.each_turn ? options_.each_turn() : absl::OkStatus();
    // Waits for a fill, a change of the replicas in sync, or Stop — no clock, unless the turn
    // failed (etcd away): then it is tried again soon.
    std::optional<std::pair<std::string, std::vector<uint32_t>>> fill =
        options_.replication->NextFill(
            turn.ok() ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(500), &changes);
    if (!fill.has_value() || fill->second.empty()) continue;
    const absl::Time start = absl::Now();
    absl::Status filled = FillReplica(fill->first, fill->second);
    if ((absl::IsNotFound(filled) &&
         absl::StrContains(filled.message(), std::string(slots::kFenceRoot))) ||
        (absl::IsUnavailable(filled) && absl::StrContains(filled.message(), "not served here"))) {
      // This member is taking a map (its fence follows its roles): soon.
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(50));
      continue;
    }
    if (!filled.ok()) {
      ARDMA_LOG(kWarning, "filling replica %s with %u slots: %s (tried again)", fill->first,
                fill->second.size(), filled.ToString());
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(500));
      continue;
    }
    ARDMA_LOG(kInfo, "filled replica %s with %u slots in %s", fill->first, fill->second.size(),
              absl::FormatDuration(absl::Now() - start));
  }
}

absl::Status ReplicaFiller::FillReplica(const std::string& replica,
                                   const std::vector<uint32_t>& slots) {
  for (size_t at = 0; at < slots.size(); at += kFillBatch) {
    std::vector<uint32_t> batch(slots.begin() + at,
                                slots.begin() + std::min(slots.size(), at + kFillBatch));
    // Freeze the batch's owned slots (clients' writes of them are told to retry), remembering
    // each one's word to serve it again.
    std::vector<std::pair<uint32_t, uint64_t>> frozen;
    uint64_t fence = 0;
    absl::Status status = options_.server->RunLocally([&](Context& ctx) -> absl::Status {
      ARDMA_ASSIGN_OR_RETURN(fence, heap::GetRoot(ctx, slots::kFenceRoot));
      ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> words, cluster::ReadFence(ctx, fence, batch));
      for (size_t i = 0; i < batch.size(); ++i) {
        if (slots::StateOf(words[i]) != slots::SlotState::kOwned) continue;
        const uint64_t cold =
            slots::FenceWord(slots::SlotState::kFrozen, slots::EpochOf(words[i]));
        ARDMA_ASSIGN_OR_RETURN(
            CasResult cas, ctx.CompareAndSwap(slots::FenceEntry(fence, batch[i]), words[i], cold));
        if (cas.swapped) frozen.emplace_back(batch[i], words[i]);
      }
      return absl::OkStatus();
    });
    std::vector<uint32_t> copied;
    for (const auto& [slot, word] : frozen) copied.push_back(slot);
    if (status.ok()) status = CopyFrozen(replica, copied);
    // Serve them again (a word that changed meanwhile is left as it is).
    absl::Status thawed = options_.server->RunLocally([&](Context& ctx) -> absl::Status {
      for (const auto& [slot, word] : frozen) {
        const uint64_t cold = slots::FenceWord(slots::SlotState::kFrozen, slots::EpochOf(word));
        ARDMA_RETURN_IF_ERROR(
            ctx.CompareAndSwap(slots::FenceEntry(fence, slot), cold, word).status());
      }
      return absl::OkStatus();
    });
    if (status.ok()) status = thawed;
    if (!status.ok()) {
      options_.replication->Unfilled(replica,
                                     std::vector<uint32_t>(slots.begin() + at, slots.end()));
      return status;
    }
    options_.replication->Filled(replica, copied);
    if (copied.size() < batch.size()) {
      // Slots the fence does not serve as this member's yet (it is taking a map, or another
      // fill or a move has them frozen): filled later, never counted filled without a copy.
      std::vector<uint32_t> later;
      std::set_difference(batch.begin(), batch.end(), copied.begin(), copied.end(),
                          std::back_inserter(later));
      later.insert(later.end(), slots.begin() + std::min(slots.size(), at + kFillBatch),
                   slots.end());
      options_.replication->Unfilled(replica, later);
      return absl::UnavailableError(absl::StrCat(later.size(), " slots are not served here yet"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReplicaFiller::CopyFrozen(const std::string& replica,
                                       const std::vector<uint32_t>& slots) {
  if (slots.empty()) return absl::OkStatus();
  // Every write of them given its order before the freeze has been forwarded (the replica takes
  // those it finds in the copy as retries).
  if (!options_.replication->AwaitForwarded(slots, absl::Now() + kFillWait)) {
    return absl::DeadlineExceededError("the slots' earlier writes are still on their way");
  }
  ARDMA_ASSIGN_OR_RETURN(Client * self, options_.peers->ClientFor(options_.self));
  ARDMA_ASSIGN_OR_RETURN(Client * to, options_.peers->ClientFor(replica));
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> tables, TablesToFill(*self));
  const std::string bitmap = dht::SlotBitmap(slots);
  for (const std::string& table : tables) {
    absl::Status purged = dht::PurgeSlots(*to, table, bitmap).status();
    if (!purged.ok() && !absl::IsNotFound(purged)) return purged;  // (no such table there yet)
    ARDMA_RETURN_IF_ERROR(dht::CopySlots(*self, *to, table, bitmap).status());
  }
  return options_.peers
      ->Replicate(replica, kReplicaBaseFunction,
                  EncodeReplicaBase(options_.replication->StreamMarks(slots)),
                  absl::Now() + kFillWait)
      .status();
}

}  // namespace ardma
