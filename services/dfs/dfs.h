// The distributed file system's algorithm: a hierarchical in-memory file system whose inodes and
// data blocks live in the heap and whose directory entries live in the DHT, written once against
// Context — in active mode every operation below is one EXECUTE; in RDMA mode each step is a round
// trip. Layout: dfs_format.h; shared steps: dfs_inode.h. The active-code library that exposes it
// (argument parsing and the function table) is dfs_functions.cc; the typed client is DfsClient.
//
//   ARDMA_ASSIGN_OR_RETURN(dfs::Fs fs, dfs::OpenFs(ctx, "home"));
//   ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, dfs::Make(ctx, fs, "/a", FileType::kFile, 0644, true));
//   ARDMA_ASSIGN_OR_RETURN(uint64_t size, dfs::Write(ctx, fs, "/a", 0, "hello"));
//
// Operations: dfs_namespace.cc (names), dfs_data.cc (file data), dfs_tree.cc (walks). Every one
// may run concurrently with any other; writers lock inode words, readers validate generations.
#ifndef ARDMA_SERVICES_DFS_DFS_H_
#define ARDMA_SERVICES_DFS_DFS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "services/dfs/dfs_format.h"
#include "services/dfs/dfs_inode.h"

namespace ardma::dfs {

// ---- Names (dfs_namespace.cc) ----

// mkdir (type kDirectory), create (kFile) and symlink (kSymlink, `content` = its target, written
// before the entry appears). An existing entry is ALREADY_EXISTS when `exclusive` or of another
// type; otherwise its stat.
absl::StatusOr<Stat> Make(Context& ctx, const Fs& fs, std::string_view path, FileType type,
                          uint32_t mode, bool exclusive, std::string_view content = {});
// symlink(2): a link at `path` to `target` (1..kMaxPathBytes bytes, never resolved).
absl::StatusOr<Stat> Symlink(Context& ctx, const Fs& fs, std::string_view path,
                             std::string_view target);
// readlink(2): INVALID_ARGUMENT if `path` is not a symbolic link.
absl::StatusOr<std::string> Readlink(Context& ctx, const Fs& fs, std::string_view path);
// lstat(2), or stat(2) with `follow` (a link at the end of `path` is followed too).
absl::StatusOr<Stat> StatPath(Context& ctx, const Fs& fs, std::string_view path,
                              bool follow = false);
// The stat of the file at `path` (a link at its end followed), for a handle (fs.sb, ino) that follows it through renames.
absl::StatusOr<Stat> OpenFile(Context& ctx, const Fs& fs, std::string_view path);
// Up to `max` (1..10000) entries of the directory (a link at the end of `path` followed) from
// child index `cursor`.
absl::StatusOr<DirPage> Readdir(Context& ctx, const Fs& fs, std::string_view path, uint64_t cursor,
                                uint32_t max);
// unlink (type kFile: a file or a symbolic link) and rmdir (kDirectory, which must be empty).
absl::Status Remove(Context& ctx, const Fs& fs, std::string_view path, FileType type);
// Replaces a target of the same kind (an empty directory, or a file or symbolic link).
absl::Status Rename(Context& ctx, const Fs& fs, std::string_view from, std::string_view to);
// Sets the permission bits and, unless `mtime_ns` is 0, the modification time (of a link's
// target with `follow`).
absl::Status SetAttr(Context& ctx, const Fs& fs, std::string_view path, uint32_t mode,
                     uint64_t mtime_ns, bool follow = false);

// ---- File data (dfs_data.cc) ----

// [offset, offset + len) of the file, short at its end; len at most kMaxIoBytes.
absl::StatusOr<std::string> Read(Context& ctx, const Fs& fs, std::string_view path, uint64_t offset,
                                 uint64_t len);
// The same through a handle; NOT_FOUND once the file was removed. A file whose bytes are on
// another member of the cluster is read there: `fs_name` names its file system.
absl::StatusOr<std::string> Pread(Context& ctx, uint64_t ino, uint64_t offset, uint64_t len,
                                  std::string_view fs_name = {});
// Writes (at most kMaxIoBytes); returns the file's new size.
absl::StatusOr<uint64_t> Write(Context& ctx, const Fs& fs, std::string_view path, uint64_t offset,
                               std::string_view data);
absl::StatusOr<uint64_t> Pwrite(Context& ctx, uint64_t sb, uint64_t ino, uint64_t offset,
                                std::string_view data, std::string_view fs_name = {});
absl::Status Truncate(Context& ctx, const Fs& fs, std::string_view path, uint64_t len);
// The same through a handle (a local file only): NOT_FOUND once it was removed.
absl::Status TruncateInode(Context& ctx, const Fs& fs, uint64_t ino, uint64_t len);
// Copies a file's data to `to` (overwritten, or created with the source's mode).
absl::StatusOr<Stat> Copy(Context& ctx, const Fs& fs, std::string_view from, std::string_view to);
// Files, directories and data blocks of the file system, and the heap's allocated bytes.
absl::StatusOr<Usage> GetUsage(Context& ctx, const Fs& fs);
// Writes `data` into the new, still unreachable, inode `ino` (a symlink's target).
absl::Status FillNewInode(Context& ctx, const Fs& fs, uint64_t ino, std::string_view data);

// ---- Batches (dfs_batch.cc) ----

// Applies `ops` in order; one result per operation (a failure does not stop the rest).
std::vector<absl::Status> ApplyBatch(Context& ctx, const Fs& fs, std::span<const BatchOp> ops);

// ---- Walks (dfs_tree.cc) ----

// A page of at most `max` entries of a depth-first, pre-order walk from `path` (depth 0) down to
// `max_depth`; `cursor` is the previous page's `next` (empty to start). A link at `path` is the
// walk's one entry, unless `follow_start` (find -H): then its target is walked, named `path`.
absl::StatusOr<FindPage> Find(Context& ctx, const Fs& fs, std::string_view path,
                              std::string_view cursor, uint32_t max, uint32_t max_depth,
                              bool follow_start = false);
struct TreeCopy {
  uint64_t files = 0, dirs = 0;
};
// Copies the tree `from` into `to` (created or merged into) in one request; symbolic links are
// copied as links. With `no_clobber` existing files are kept; with `preserve` modes and
// modification times are copied, else what is created gets the source's mode less `umask`.
absl::StatusOr<TreeCopy> CopyTree(Context& ctx, const Fs& fs, std::string_view from,
                                  std::string_view to, bool no_clobber, bool preserve,
                                  uint32_t umask = 0);

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_H_
