// `ardma cluster add ID | remove ID | rebalance`: moves slots between a cluster's servers while
// clients run (docs/cluster.md, "Moving slots"); `ardma cluster fix` repairs what a mover that
// died mid-move left behind. One move gives a set of slots from one server to another:
//
//   1. freeze the slots in the giver's fence (reads go on, writes wait); seal their locks and wait
//      for each to be free (a slot whose lock stays busy is given back and kept); seal their
//      lists and read them;
//   2. copy their keys, table by table, sweeping the giver's buckets under their locks (so a
//      write that checked the fence before the freeze is in the copy); the receiver adopts the
//      locks and lists, not served yet;
//   3. mark them owned in the receiver's fence, then moved (naming the receiver) in the giver's,
//      whose lists stop answering;
//   4. publish the map at the next epoch, compared on the map's etcd revision, and serve the
//      receiver's locks and lists;
//   5. purge the giver's keys (its sealed locks and lists stay, for clients that cached their
//      addresses).
//
// A failure before 4 puts both fences back and serves the giver's locks and lists again; a mover
// that dies leaves them for `cluster fix`. The admin lock keeps other administrators out
// throughout.
#include <unistd.h>

#include <initializer_list>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/client/remote_context.h"
#include "core/cluster/admin.h"
#include "core/cluster/fence.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_mover.h"
#include "services/dht/dht_mover.h"
#include "services/list/list_mover.h"
#include "services/lock/lock_mover.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

using cluster::MemberInfo;

struct MoveReport {
  size_t moved = 0, busy = 0;
  size_t file_system = 0;  // slots kept: they hold a file system's namespace or files' bytes
  uint64_t keys = 0;
  absl::Duration took;
};

// A server's Client, by its member entry.
absl::StatusOr<std::unique_ptr<Client>> ConnectMember(const MemberInfo& member) {
  for (const char* transport : {"tls", "tcp"}) {
    if (auto it = member.addresses.find(transport); it != member.addresses.end()) {
      ClientOptions options;
      options.connect_attempts = 2;
      return Client::Connect(it->second, options);
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("member ", member.id, " has no tcp address"));
}

// Steps 2 and 5 over every table of the giver (not the lock service's or the file systems' own).
absl::StatusOr<uint64_t> ForEachTable(Client& giver,
                                      const std::function<absl::StatusOr<uint64_t>(
                                          const std::string& table)>& step) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> tables, dht::TablesOn(giver));
  uint64_t keys = 0;
  for (const std::string& table : tables) {
    if (table == lock::kTable || dfs::IsFileSystemTable(table)) continue;
    ARDMA_ASSIGN_OR_RETURN(uint64_t n, step(table));
    keys += n;
  }
  return keys;
}

class SlotMove {
 public:
  SlotMove(cluster::EtcdClient& etcd, const cluster::ClusterAddress& where, const MemberInfo& from,
           const MemberInfo& to, absl::Duration lock_wait)
      : etcd_(etcd), where_(where), from_(from), to_(to), lock_wait_(lock_wait) {}

  absl::StatusOr<MoveReport> Run(std::vector<uint32_t> slots) {
    const absl::Time start = absl::Now();
    ARDMA_ASSIGN_OR_RETURN(giver_, ConnectMember(from_));
    ARDMA_ASSIGN_OR_RETURN(receiver_, ConnectMember(to_));
    gctx_.emplace(giver_.get(), std::initializer_list<const ActiveLibrary*>{});
    rctx_.emplace(receiver_.get(), std::initializer_list<const ActiveLibrary*>{});
    ARDMA_ASSIGN_OR_RETURN(giver_fence_, heap::GetRoot(*gctx_, slots::kFenceRoot));
    ARDMA_ASSIGN_OR_RETURN(receiver_fence_, cluster::OpenFence(*rctx_));
    ARDMA_ASSIGN_OR_RETURN(stored_, cluster::ReadMap(etcd_, where_.name));
    slots_ = std::move(slots);
    ARDMA_RETURN_IF_ERROR(CheckGiverServes());
    MoveReport report;
    ARDMA_ASSIGN_OR_RETURN(report.busy, Freeze(&report.file_system));
    if (slots_.empty()) return report;
    absl::StatusOr<uint64_t> copied = HandOver();
    if (!copied.ok()) {
      Undo();
      return copied.status();
    }
    // The map names the receiver now: its locks and lists are served there. (A mover that dies
    // here leaves them sealed, for `cluster fix`.)
    ARDMA_RETURN_IF_ERROR(lock::UnsealIn(*receiver_, SlotSet()));
    ARDMA_RETURN_IF_ERROR(list::ServeListsIn(*receiver_, SlotSet(), /*served=*/true));
    report.moved = slots_.size();
    report.keys = *copied;
    // 5.
    ARDMA_RETURN_IF_ERROR(ForEachTable(*giver_, [&](const std::string& table) {
                            return dht::PurgeSlots(*giver_, table, dht::SlotBitmap(slots_));
                          }).status());
    report.took = absl::Now() - start;
    return report;
  }

 private:
  std::set<uint32_t> SlotSet() const { return std::set<uint32_t>(slots_.begin(), slots_.end()); }

  // The map and the giver's fence agree that the giver serves every slot to move.
  absl::Status CheckGiverServes() {
    ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> words,
                           cluster::ReadFence(*gctx_, giver_fence_, slots_));
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (stored_.map.Owner(slots_[i]) != from_.id ||
          slots::StateOf(words[i]) != slots::SlotState::kOwned) {
        return absl::FailedPreconditionError(absl::StrCat(
            "slot ", slots_[i], " is not served by ", from_.id,
            " as the map says (run ardma cluster status)"));
      }
    }
    return absl::OkStatus();
  }

  // Step 1: freezes the slots, seals their locks once free and their lists. The slots of locks
  // that stayed busy are served again and dropped from the move; returns how many. So are those
  // that hold file system state (counted in *file_system): a file system does not move yet.
  absl::StatusOr<size_t> Freeze(size_t* file_system) {
    const uint64_t epoch = stored_.map.epoch();
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
        *gctx_, giver_fence_, slots_, slots::FenceWord(slots::SlotState::kFrozen, epoch + 1), 0));
    // (Frozen, the slots take no new file: what holds a file system's state now stays so.)
    absl::StatusOr<std::set<uint32_t>> dfs_held = dfs::SlotsWithFileSystemState(*giver_);
    if (!dfs_held.ok()) {
      Undo();
      return dfs_held.status();
    }
    std::vector<uint32_t> dfs_kept;
    for (uint32_t s : slots_) {
      if (dfs_held->contains(s)) dfs_kept.push_back(s);
    }
    if (!dfs_kept.empty()) {
      ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
          *gctx_, giver_fence_, dfs_kept, slots::FenceWord(slots::SlotState::kOwned, epoch), 0));
      *file_system = std::erase_if(slots_, [&](uint32_t s) { return dfs_held->contains(s); });
    }
    std::set<uint32_t> busy;
    absl::StatusOr<std::vector<lock::SealedLock>> locks =
        lock::SealWhenFree(*giver_, SlotSet(), absl::Now() + lock_wait_, &busy);
    if (!locks.ok()) {
      Undo();
      return locks.status();
    }
    locks_ = *std::move(locks);
    if (!busy.empty()) {
      std::vector<uint32_t> kept(busy.begin(), busy.end());
      ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
          *gctx_, giver_fence_, kept, slots::FenceWord(slots::SlotState::kOwned, epoch), 0));
    }
    size_t dropped = std::erase_if(slots_, [&](uint32_t s) { return busy.contains(s); });
    absl::StatusOr<std::vector<list::SealedList>> lists = list::SealListsIn(*giver_, SlotSet());
    if (!lists.ok()) {
      Undo();
      return lists.status();
    }
    lists_ = *std::move(lists);
    return dropped;
  }

  // Steps 2-4 (the receiver's locks and lists not served yet); returns the keys copied. On error
  // the caller undoes them.
  absl::StatusOr<uint64_t> HandOver() {
    const uint64_t epoch = stored_.map.epoch() + 1;
    ARDMA_ASSIGN_OR_RETURN(uint64_t copied, ForEachTable(*giver_, [&](const std::string& table) {
                             return dht::CopySlots(*giver_, *receiver_, table,
                                                   dht::SlotBitmap(slots_));
                           }));
    ARDMA_RETURN_IF_ERROR(lock::AdoptAll(*receiver_, locks_));
    ARDMA_RETURN_IF_ERROR(list::AdoptLists(*receiver_, lists_));
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
        *rctx_, receiver_fence_, slots_, slots::FenceWord(slots::SlotState::kOwned, epoch), 0));
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(*gctx_, giver_fence_, slots_,
                                              slots::FenceWord(slots::SlotState::kMoved, epoch),
                                              cluster::IdWord(to_.id)));
    // Before anyone may change them on the receiver, the giver's lists stop answering reads.
    ARDMA_RETURN_IF_ERROR(list::ServeListsIn(*giver_, SlotSet(), /*served=*/false));
    ARDMA_ASSIGN_OR_RETURN(bool published,
                           etcd_.PutIf(cluster::MapKey(where_.name), stored_.revision,
                                       stored_.map.WithSlots(slots_, to_.id).ToJson()));
    if (!published) return absl::AbortedError("the slot map changed during the move");
    return copied;
  }

  // The giver serves the slots again; the receiver drops what it was given (its adopted locks
  // and lists are never served).
  void Undo() {
    (void)cluster::WriteFence(*rctx_, receiver_fence_, slots_, 0, 0);
    (void)ForEachTable(*receiver_, [&](const std::string& table) {
      return dht::PurgeSlots(*receiver_, table, dht::SlotBitmap(slots_));
    });
    (void)cluster::WriteFence(*gctx_, giver_fence_, slots_,
                              slots::FenceWord(slots::SlotState::kOwned, stored_.map.epoch()), 0);
    (void)lock::UnsealIn(*giver_, SlotSet());
    (void)list::ServeListsIn(*giver_, SlotSet(), /*served=*/true);
  }

  cluster::EtcdClient& etcd_;
  const cluster::ClusterAddress& where_;
  const MemberInfo& from_;
  const MemberInfo& to_;
  const absl::Duration lock_wait_;
  std::unique_ptr<Client> giver_, receiver_;
  std::optional<RemoteContext> gctx_, rctx_;
  uint64_t giver_fence_ = 0, receiver_fence_ = 0;
  cluster::StoredMap stored_;
  std::vector<uint32_t> slots_;
  std::vector<lock::SealedLock> locks_;
  std::vector<list::SealedList> lists_;
};

// The servers the slots should end up even over, for `add ID`, `remove ID` or `rebalance`.
absl::StatusOr<std::vector<std::string>> Targets(const std::vector<std::string>& args,
                                                 const cluster::SlotMap& map,
                                                 const std::map<std::string, MemberInfo>& live) {
  std::vector<std::string> targets;
  if (args[1] == "rebalance") {
    for (const auto& [id, member] : live) targets.push_back(id);
    return targets;
  }
  const std::string& id = args[2];
  targets = map.Servers();
  if (args[1] == "add") {
    if (!live.contains(id)) {
      return absl::NotFoundError(absl::StrCat("server ", id, " is not a live member"));
    }
    targets.push_back(id);
  } else {
    if (std::find(targets.begin(), targets.end(), id) == targets.end()) {
      return absl::NotFoundError(absl::StrCat("server ", id, " owns no slots"));
    }
    std::erase(targets, id);
  }
  return targets;
}

}  // namespace

// `cluster fix` on one member: its fence made to agree with the map — owned where the map names
// it, moved (naming the map's owner) where it says owned or frozen but the map names another —,
// its locks and lists served in the slots it owns and sealed in the others, and the keys of slots
// it does not own purged from its tables.
absl::Status FixMember(const MemberInfo& member, const cluster::SlotMap& map) {
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, ConnectMember(member));
  RemoteContext ctx(client.get(), {});
  ARDMA_ASSIGN_OR_RETURN(uint64_t fence, cluster::OpenFence(ctx));
  std::vector<uint32_t> all(slots::kSlots);
  for (uint32_t s = 0; s < slots::kSlots; ++s) all[s] = s;
  ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> words, cluster::ReadFence(ctx, fence, all));
  std::vector<uint32_t> to_own, others;
  std::map<std::string, std::vector<uint32_t>> to_move;  // by the map's owner
  for (uint32_t s = 0; s < slots::kSlots; ++s) {
    slots::SlotState state = slots::StateOf(words[s]);
    const std::string& owner = map.Owner(s);
    if (owner == member.id) {
      if (state != slots::SlotState::kOwned) to_own.push_back(s);
      continue;
    }
    others.push_back(s);
    if (state == slots::SlotState::kOwned || state == slots::SlotState::kFrozen) {
      to_move[owner].push_back(s);
    }
  }
  ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
      ctx, fence, to_own, slots::FenceWord(slots::SlotState::kOwned, map.epoch()), 0));
  size_t moved = 0;
  for (const auto& [owner, moving] : to_move) {
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(ctx, fence, moving,
                                              slots::FenceWord(slots::SlotState::kMoved, map.epoch()),
                                              cluster::IdWord(owner)));
    moved += moving.size();
  }
  std::set<uint32_t> owned;
  for (uint32_t s = 0; s < slots::kSlots; ++s) {
    if (map.Owner(s) == member.id) owned.insert(s);
  }
  const std::set<uint32_t> not_owned(others.begin(), others.end());
  ARDMA_RETURN_IF_ERROR(lock::UnsealIn(*client, owned));
  ARDMA_RETURN_IF_ERROR(lock::SealIn(*client, not_owned));
  ARDMA_RETURN_IF_ERROR(list::ServeListsIn(*client, owned, /*served=*/true));
  ARDMA_RETURN_IF_ERROR(list::ServeListsIn(*client, not_owned, /*served=*/false));
  const std::string bitmap = dht::SlotBitmap(others);
  ARDMA_ASSIGN_OR_RETURN(uint64_t purged, ForEachTable(*client, [&](const std::string& table) {
                           return dht::PurgeSlots(*client, table, bitmap);
                         }));
  std::cout << absl::StrFormat("%s: %d slots served again, %d marked moved, %d stray keys removed\n",
                               member.id, to_own.size(), moved, purged);
  return absl::OkStatus();
}

absl::Status RunRebalance(cluster::EtcdClient& etcd, const cluster::ClusterAddress& where,
                          const std::vector<std::string>& args, absl::Duration lock_wait) {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  ARDMA_ASSIGN_OR_RETURN(
      std::unique_ptr<cluster::AdminLock> lock,
      cluster::AdminLock::Acquire(etcd, where.name,
                                  absl::StrCat("ardma cluster ", args[1], " on ", host, ", pid ",
                                               ::getpid())));
  ARDMA_ASSIGN_OR_RETURN(cluster::StoredMap stored, cluster::ReadMap(etcd, where.name));
  ARDMA_ASSIGN_OR_RETURN(std::vector<MemberInfo> members, cluster::ListMembers(etcd, where.name));
  std::map<std::string, MemberInfo> live;
  for (MemberInfo& m : members) live[m.id] = std::move(m);
  if (args[1] == "fix") {
    for (const auto& [id, member] : live) ARDMA_RETURN_IF_ERROR(FixMember(member, stored.map));
    return absl::OkStatus();
  }
  if (stored.map.Replicated()) {
    // The mover copies keys with unfenced imports, which its replicas would not see.
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster ", where.name, " replicates its slots: moving replicated slots is not built yet "
        "(the keys would reach the new owner but not its replicas)"));
  }
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> targets, Targets(args, stored.map, live));
  ARDMA_ASSIGN_OR_RETURN(std::vector<cluster::Move> moves,
                         cluster::PlanRebalance(stored.map, targets));
  for (const cluster::Move& move : moves) {
    for (const std::string& id : {move.from, move.to}) {
      if (!live.contains(id)) {
        return absl::UnavailableError(
            absl::StrCat("server ", id, " is not a live member: its slots cannot move"));
      }
    }
  }
  if (moves.empty()) std::cout << "cluster " << where.name << ": the slots are even already\n";
  for (const cluster::Move& move : moves) {
    ARDMA_ASSIGN_OR_RETURN(
        MoveReport r,
        SlotMove(etcd, where, live[move.from], live[move.to], lock_wait).Run(move.slots));
    std::cout << absl::StrFormat("%s -> %s: %d slots, %d keys in %.2f s", move.from, move.to,
                                 r.moved, r.keys, absl::ToDoubleSeconds(r.took));
    if (r.busy > 0) {
      std::cout << absl::StrFormat(" (%d slots kept: a lock in them stayed busy for %s)", r.busy,
                                   absl::FormatDuration(lock_wait));
    }
    if (r.file_system > 0) {
      std::cout << absl::StrFormat(
          " (%d slots kept: they hold a file system's namespace or files, which do not move yet)",
          r.file_system);
    }
    std::cout << "\n";
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
