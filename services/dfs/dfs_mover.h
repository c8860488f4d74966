// What a slot move (tools/ardma_rebalance.cc) must know about the file systems on a member: a
// file system's namespace and its files' bytes do not move with their slots yet, so a move keeps
// those slots where they are, and the file systems' own tables are never swept by key.
#ifndef ARDMA_SERVICES_DFS_DFS_MOVER_H_
#define ARDMA_SERVICES_DFS_DFS_MOVER_H_

#include <cstdint>
#include <set>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/client/client.h"

namespace ardma::dfs {

// The DHT tables the file system keeps for itself (unfenced, keyed by inode or directory): its
// directory entries "dfs.<name>", contents "dfd.<name>" and orphans "dfo.<name>".
bool IsFileSystemTable(std::string_view table);

// The slots `server` holds file system state in: the namespace slot of each file system whose
// namespace it holds, and the data slot of each file whose bytes it holds. (Run while the slots
// to move are frozen: no file can be made in them meanwhile.)
absl::StatusOr<std::set<uint32_t>> SlotsWithFileSystemState(Client& server);

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_MOVER_H_
