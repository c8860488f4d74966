// One file system across a cluster (docs/dfs.md): the namespace (superblock, inodes, directory
// entries) stays on the member that owns the file system's slot, and each file's bytes live on
// the member that owns its data slot (DataSlot(fs, ino)), in a content inode of that member's own
// — a file inode as dfs_inode.h lays it out, with no name — found by the file's inode number in
// the member's unfenced DHT table "dfd.<name>" and counted in its superblock at the heap root
// "dfd:<name>".
//
// The content member is authoritative for a file's bytes and size. The namespace inode (marked
// kInRemote) keeps a copy of size, mtime and ctime for stat, readdir and find, copied back after
// every change together with the content generation it was read at (kInDataGen), so an older
// copy never overwrites a newer one. Writes through the namespace (by path) get the new state in
// the content member's answer; writes straight to the content member (by handle) send it back to
// the namespace member (dfs.csync) before they answer, so a stat after a write sees it.
//
// Internal to the dfs library. The content functions (ContentFunctions) run on the content member,
// reached from the namespace member with Context::CallPeer, or called here directly when this
// member owns the data slot too:
//   dfs.ccreate   fs:Str16 ino:u64 mode:u32               -> state   (a new, empty file)
//   dfs.cread     fs:Str16 ino:u64 offset:u64 len:u64     -> bytes
//   dfs.cwrite    fs:Str16 ino:u64 offset:u64 flags:u8 data:Bytes32 -> state
//   dfs.ctruncate fs:Str16 ino:u64 len:u64                -> state
//   dfs.cfree     fs:Str16 ino:u64                        -> ""     (none there is fine)
//   dfs.ccopy     fs:Str16 ino:u64 to:u64                 -> state of `to` (pushed to its member)
//   dfs.cusage    fs:Str16                                -> files:u64 blocks:u64
//   dfs.copen     fs:Str16 ino:u64                        -> the content inode's address:u64, for
//                                                            readers next to the bytes (grep)
// and on the namespace member:
//   dfs.csync     fs:Str16 ino:u64 state                  -> ""
// state := size:u64 mtime_ns:u64 gen:u64. cwrite's flags: kTruncateFirst, kSyncNamespace.
#ifndef ARDMA_SERVICES_DFS_DFS_CONTENT_H_
#define ARDMA_SERVICES_DFS_DFS_CONTENT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "services/dfs/dfs_inode.h"

namespace ardma::dfs {

// A file's contents as its member last changed them.
struct ContentState {
  uint64_t size = 0, mtime_ns = 0, gen = 0;
};

// ---- The namespace member's side ----

// Before the first change of an operation that may call the content members: moves the request
// to a worker thread (Context::MoveToWorker) when `fs` spreads its files.
absl::Status PrepareForPeers(Context& ctx, const Fs& fs);
// A new file's contents on its member; marks inode `ino` (new, not yet reachable) remote.
absl::Status CreateContent(Context& ctx, const Fs& fs, uint64_t ino, uint32_t mode);
// [offset, offset + len) of remote file `ino` (short at its end).
absl::StatusOr<std::string> ReadContent(Context& ctx, std::string_view fs, uint64_t ino,
                                        uint64_t offset, uint64_t len);
// Writes remote file `ino` and copies its new state into the inode. Returns the new size.
absl::StatusOr<uint64_t> WriteContent(Context& ctx, std::string_view fs, uint64_t ino,
                                      uint64_t offset, std::string_view data);
absl::Status TruncateContent(Context& ctx, std::string_view fs, uint64_t ino, uint64_t len);
// Copies remote file `from`'s bytes over remote file `to`'s, member to member.
absl::Status CopyContent(Context& ctx, std::string_view fs, uint64_t from, uint64_t to);
// Frees inode `n`, which nobody can reach any more, and for a remote file its contents on their
// member. If that member cannot be reached (down, or not answering in time) the removal still
// succeeds: the inode's block stays allocated (so its number is not reused) and is recorded as an
// orphan in the namespace member's table "dfo.<name>"; a later removal on this file system frees
// the orphans' contents, then their blocks (at most one attempt a second).
absl::Status DiscardInode(Context& ctx, const Fs& fs, const Inode& n);
// Orphans still waiting for their contents to be freed.
absl::StatusOr<uint64_t> OrphanCount(Context& ctx, const Fs& fs);
// Copies `state` into inode `ino` unless it holds a newer one.
absl::Status ApplyContentState(Context& ctx, uint64_t ino, const ContentState& state);

// The content functions (above), for the library's function table.
namespace content_functions {
absl::StatusOr<std::string> Create(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Read(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Write(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Truncate(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Free(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Copy(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Usage(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Open(Context& ctx, std::string_view args);
absl::StatusOr<std::string> Sync(Context& ctx, std::string_view args);
}  // namespace content_functions

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_CONTENT_H_
