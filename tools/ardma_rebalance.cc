// `ardma cluster add ID | remove ID | rebalance`: moves slots between a cluster's servers while
// clients run (docs/cluster.md, "Moving slots"); `ardma cluster fix` repairs what a mover that
// died mid-move left behind. One move gives a set of slots from one server to another:
//
//   1. freeze the slots in the giver's fence (reads go on, writes wait), then seal their locks
//      and wait for each to be free (a slot whose lock stays busy is given back and kept);
//   2. copy their keys, table by table, sweeping the giver's buckets under their locks (so a
//      write that checked the fence before the freeze is in the copy), and adopt their locks on
//      the receiver, sealed;
//   3. mark them owned in the receiver's fence, then moved (naming the receiver) in the giver's;
//   4. publish the map at the next epoch, compared on the map's etcd revision, and unseal the
//      receiver's locks;
//   5. purge the giver's copies (its sealed locks stay, for clients that cached their address).
//
// A failure before 4 puts both fences back and unseals the giver's locks; a mover that dies
// leaves them for `cluster fix`. The admin lock keeps other administrators out throughout. Slots
// that hold a list do not move (the list service does not check the fence yet): they stay with the
// giver and are reported.
#include <unistd.h>

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
#include "services/dht/dht_mover.h"
#include "services/list/list_format.h"
#include "services/lock/lock_mover.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

using cluster::MemberInfo;

struct MoveReport {
  size_t moved = 0, kept = 0, busy = 0;
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

// The slots that hold a list on `server`: they do not move.
absl::StatusOr<std::set<uint32_t>> PinnedSlots(Client& server) {
  std::set<uint32_t> pinned;
  RemoteContext ctx(&server, {});
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> lists, heap::ListRoots(ctx, list::kRootPrefix));
  for (const std::string& root : lists) {
    pinned.insert(slots::SlotOf(list::kListSpace, root.substr(list::kRootPrefix.size())));
  }
  return pinned;
}

// Steps 2 and 5 over every table of the giver (not the lock service's own).
absl::StatusOr<uint64_t> ForEachTable(Client& giver,
                                      const std::function<absl::StatusOr<uint64_t>(
                                          const std::string& table)>& step) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> tables, dht::TablesOn(giver));
  uint64_t keys = 0;
  for (const std::string& table : tables) {
    if (table == lock::kTable) continue;
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
    RemoteContext gctx(giver_.get(), {}), rctx(receiver_.get(), {});
    ARDMA_ASSIGN_OR_RETURN(giver_fence_, heap::GetRoot(gctx, slots::kFenceRoot));
    ARDMA_ASSIGN_OR_RETURN(receiver_fence_, cluster::OpenFence(rctx));
    ARDMA_ASSIGN_OR_RETURN(cluster::StoredMap stored, cluster::ReadMap(etcd_, where_.name));
    MoveReport report;
    ARDMA_ASSIGN_OR_RETURN(std::set<uint32_t> pinned, PinnedSlots(*giver_));
    report.kept = std::erase_if(slots, [&](uint32_t s) { return pinned.contains(s); });
    if (slots.empty()) return report;
    ARDMA_RETURN_IF_ERROR(CheckGiverServes(gctx, stored.map, slots));
    // 1.
    const uint64_t epoch = stored.map.epoch();
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
        gctx, giver_fence_, slots, slots::FenceWord(slots::SlotState::kFrozen, epoch + 1), 0));
    std::set<uint32_t> busy;
    absl::StatusOr<std::vector<lock::SealedLock>> locks = lock::SealWhenFree(
        *giver_, std::set<uint32_t>(slots.begin(), slots.end()), absl::Now() + lock_wait_, &busy);
    if (!locks.ok()) {
      Undo(gctx, rctx, slots, epoch, dht::SlotBitmap(slots));
      return locks.status();
    }
    if (!busy.empty()) {
      std::vector<uint32_t> kept(busy.begin(), busy.end());
      ARDMA_RETURN_IF_ERROR(cluster::WriteFence(gctx, giver_fence_, kept,
                                                slots::FenceWord(slots::SlotState::kOwned, epoch), 0));
      report.busy = std::erase_if(slots, [&](uint32_t s) { return busy.contains(s); });
      if (slots.empty()) return report;
    }
    const std::string bitmap = dht::SlotBitmap(slots);
    absl::StatusOr<uint64_t> copied = HandOver(gctx, rctx, stored, slots, bitmap, *locks);
    if (!copied.ok()) {
      Undo(gctx, rctx, slots, epoch, bitmap);
      return copied.status();
    }
    // The map names the receiver now: its locks are served there. (A mover that dies here leaves
    // them sealed, for `cluster fix`.)
    ARDMA_RETURN_IF_ERROR(lock::UnsealIn(*receiver_, std::set<uint32_t>(slots.begin(), slots.end())));
    report.moved = slots.size();
    report.keys = *copied;
    // 5.
    ARDMA_RETURN_IF_ERROR(ForEachTable(*giver_, [&](const std::string& table) {
                            return dht::PurgeSlots(*giver_, table, bitmap);
                          }).status());
    report.took = absl::Now() - start;
    return report;
  }

 private:
  // The map and the giver's fence agree that the giver serves every one of `slots`.
  absl::Status CheckGiverServes(RemoteContext& gctx, const cluster::SlotMap& map,
                                const std::vector<uint32_t>& slots) {
    ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> words,
                           cluster::ReadFence(gctx, giver_fence_, slots));
    for (size_t i = 0; i < slots.size(); ++i) {
      if (map.Owner(slots[i]) != from_.id ||
          slots::StateOf(words[i]) != slots::SlotState::kOwned) {
        return absl::FailedPreconditionError(absl::StrCat(
            "slot ", slots[i], " is not served by ", from_.id,
            " as the map says (run ardma cluster status)"));
      }
    }
    return absl::OkStatus();
  }

  // Steps 2-4 (but the receiver's locks stay sealed); returns the keys copied. On error the caller
  // undoes them.
  absl::StatusOr<uint64_t> HandOver(RemoteContext& gctx, RemoteContext& rctx,
                                    const cluster::StoredMap& stored,
                                    const std::vector<uint32_t>& slots, const std::string& bitmap,
                                    const std::vector<lock::SealedLock>& locks) {
    const uint64_t epoch = stored.map.epoch() + 1;
    ARDMA_ASSIGN_OR_RETURN(uint64_t copied,
                           ForEachTable(*giver_, [&](const std::string& table) {
                             return dht::CopySlots(*giver_, *receiver_, table, bitmap);
                           }));
    ARDMA_RETURN_IF_ERROR(lock::AdoptAll(*receiver_, locks));
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(
        rctx, receiver_fence_, slots, slots::FenceWord(slots::SlotState::kOwned, epoch), 0));
    ARDMA_RETURN_IF_ERROR(cluster::WriteFence(gctx, giver_fence_, slots,
                                              slots::FenceWord(slots::SlotState::kMoved, epoch),
                                              cluster::IdWord(to_.id)));
    ARDMA_ASSIGN_OR_RETURN(bool published,
                           etcd_.PutIf(cluster::MapKey(where_.name), stored.revision,
                                       stored.map.WithSlots(slots, to_.id).ToJson()));
    if (!published) return absl::AbortedError("the slot map changed during the move");
    return copied;
  }

  // The giver serves the slots again; the receiver drops what it was given (its adopted locks
  // stay sealed: a sealed lock is never served).
  void Undo(RemoteContext& gctx, RemoteContext& rctx, const std::vector<uint32_t>& slots,
            uint64_t epoch, const std::string& bitmap) {
    (void)cluster::WriteFence(rctx, receiver_fence_, slots, 0, 0);
    (void)ForEachTable(*receiver_, [&](const std::string& table) {
      return dht::PurgeSlots(*receiver_, table, bitmap);
    });
    (void)cluster::WriteFence(gctx, giver_fence_, slots,
                              slots::FenceWord(slots::SlotState::kOwned, epoch), 0);
    (void)lock::UnsealIn(*giver_, std::set<uint32_t>(slots.begin(), slots.end()));
  }

  cluster::EtcdClient& etcd_;
  const cluster::ClusterAddress& where_;
  const MemberInfo& from_;
  const MemberInfo& to_;
  const absl::Duration lock_wait_;
  std::unique_ptr<Client> giver_, receiver_;
  uint64_t giver_fence_ = 0, receiver_fence_ = 0;
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
// its locks served in the slots it owns and sealed in the others, and the keys of slots it does
// not own purged from its tables.
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
  ARDMA_RETURN_IF_ERROR(lock::UnsealIn(*client, owned));
  ARDMA_RETURN_IF_ERROR(lock::SealIn(*client, std::set<uint32_t>(others.begin(), others.end())));
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
    if (r.kept > 0) std::cout << absl::StrFormat(" (%d slots kept: they hold lists)", r.kept);
    if (r.busy > 0) {
      std::cout << absl::StrFormat(" (%d slots kept: a lock in them stayed busy for %s)", r.busy,
                                   absl::FormatDuration(lock_wait));
    }
    std::cout << "\n";
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
