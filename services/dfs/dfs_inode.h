// The file system's words in memory (layout: dfs_format.h) and the steps every operation shares:
// opening a file system by name, reading and making inodes, directory entries (in the DHT),
// inode lock words, path resolution and child arrays. Internal to the dfs library and its readers
// (dfs_reader.h); written against Context, safe to call concurrently from any number of clients
// and active functions.
#ifndef ARDMA_SERVICES_DFS_DFS_INODE_H_
#define ARDMA_SERVICES_DFS_DFS_INODE_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/context/context.h"
#include "services/dfs/dfs_format.h"

namespace ardma::dfs {

inline constexpr int kMaxRetries = 1000;
inline constexpr uint32_t kMaxPage = 10000;

int64_t NowNs();

// ---- File systems and inodes ----

struct Fs {
  std::string name;
  std::string table;  // DHT table of directory entries (this server's own: never fenced)
  uint64_t sb = 0;
  uint64_t root = 0;
  // This server is a member of a cluster: the files it makes keep their bytes on the member that
  // owns their data slot (docs/dfs.md).
  bool spread = false;
};

// The file system `name`, created (superblock and root directory) on first use. On a member of a
// cluster, the redirect (slots::RedirectOf) unless it serves the file system's slot.
absl::StatusOr<Fs> OpenFs(Context& ctx, std::string_view name);

struct Inode {
  uint64_t ino = 0;
  FileType type = FileType::kFile;
  uint64_t parent = 0, size = 0, table = 0, capacity = 0, index = 0, gen = 0;
  uint32_t mode = 0;
  int64_t mtime = 0, ctime = 0;
  bool removed = false;
  bool remote = false;    // a file whose bytes are on its data slot's member (kInRemote)
  uint64_t data_gen = 0;  // the content generation size and times were copied at
  std::string name;

  Stat ToStat() const {
    return Stat{ino, type, size, mode, absl::FromUnixNanos(mtime), absl::FromUnixNanos(ctime)};
  }
};

// The u64 at `offset` of an inode or superblock image.
uint64_t Field(const char* bytes, uint64_t offset);
// NotFound if `ino` is not a live inode (removed, or never one).
absl::StatusOr<Inode> ReadInode(Context& ctx, uint64_t ino);
absl::StatusOr<uint64_t> NewInode(Context& ctx, FileType type, uint64_t parent,
                                  std::string_view name, uint32_t mode);
// Frees an inode that nobody can reach any more, with its table and data blocks.
absl::Status FreeInode(Context& ctx, const Fs& fs, const Inode& n);
// Whether inode `ino` is still a live inode at generation `gen` (one READ). Readers take data
// only if this holds afterwards (a seqlock on the generation).
absl::StatusOr<bool> Unchanged(Context& ctx, uint64_t ino, uint64_t gen);
// Writes the u64 fields (offset, value) of inode `ino` in one batch.
absl::Status SetFields(Context& ctx, uint64_t ino,
                       std::initializer_list<std::pair<uint64_t, uint64_t>> fields);
// The first `count` entries of a block or child table.
absl::StatusOr<std::vector<uint64_t>> ReadTable(Context& ctx, uint64_t table, uint64_t count);
// Frees every data block of a file's table (not the table) and counts them off the superblock.
absl::Status FreeBlocks(Context& ctx, const Fs& fs, std::span<const uint64_t> blocks);

// ---- Directory entries (the DHT) ----

struct Entry {
  uint64_t ino = 0;
  FileType type = FileType::kFile;
};
absl::StatusOr<std::optional<Entry>> LookupEntry(Context& ctx, const Fs& fs, uint64_t parent,
                                                 std::string_view name);
absl::Status PutEntry(Context& ctx, const Fs& fs, uint64_t parent, std::string_view name,
                      const Entry& e);
absl::Status RemoveEntry(Context& ctx, const Fs& fs, uint64_t parent, std::string_view name);

// ---- Inode locks ----

// Lock words (each inode's, the superblock's rename lock) held by one operation, released in
// the destructor if the operation returns early. The rule for a dead holder: lock_word.h.
class Locks {
 public:
  explicit Locks(Context& ctx) : ctx_(ctx) {}
  ~Locks() { Release().IgnoreError(); }
  Locks(const Locks&) = delete;
  Locks& operator=(const Locks&) = delete;
  // Locks every word in `addrs` (deduplicated, in address order: no deadlock between operations).
  absl::Status Take(std::vector<uint64_t> addrs);
  absl::Status Release();

 private:
  Context& ctx_;
  std::vector<std::pair<uint64_t, uint64_t>> held_;  // address, nonce
};

// ---- Paths ----

absl::Status NotADirectory();
absl::Status IsADirectory();
absl::Status NoSuchEntry(std::string_view path);

// Symbolic links in paths are followed as the kernel follows them: every one before the last
// component, the last one only when asked (stat(2) rather than lstat(2)) or when the path ends in
// "/". More than kMaxLinks on one path is FAILED_PRECONDITION "too many levels of symbolic links".
inline constexpr int kMaxLinks = 40;  // Linux's MAXSYMLINKS

// The inode `path` names.
absl::StatusOr<uint64_t> Resolve(Context& ctx, const Fs& fs, std::string_view path,
                                 bool follow_last = false);
// The regular file at `path`, a link at its end followed (FAILED_PRECONDITION for a directory).
absl::StatusOr<uint64_t> ResolveFile(Context& ctx, const Fs& fs, std::string_view path);

// The directory a path's last component lives in, and that name. INVALID_ARGUMENT for "/", or a
// path ending in "." or "..".
struct Place {
  uint64_t parent = 0;
  std::string_view name;
};
absl::StatusOr<Place> ResolvePlace(Context& ctx, const Fs& fs, std::string_view path);
// INVALID_ARGUMENT `message` if directory `dir` is `ino` or below it.
absl::Status CheckNotBelow(Context& ctx, const Fs& fs, uint64_t dir, uint64_t ino,
                           std::string_view message);

// ---- Child arrays and block tables ----

// Makes `table` (capacity `capacity`, 8-byte entries) hold at least `need` entries: a new table
// with the old entries copied and the rest zero. Returns the (possibly new) table and capacity.
absl::StatusOr<std::pair<uint64_t, uint64_t>> GrowTable(Context& ctx, uint64_t table,
                                                        uint64_t capacity, uint64_t need);
// Adds `child` to directory `dir` (locked). Updates the child's index.
absl::Status AppendChild(Context& ctx, const Inode& dir, uint64_t child);
// Takes the child at `index` out of directory `dir` (locked): the last child moves into the gap.
absl::Status RemoveChild(Context& ctx, const Inode& dir, uint64_t index);

// ---- Data ----

// Reads [offset, offset + len) of file inode `n` (clipped to its size; holes read as zeros).
absl::StatusOr<std::string> ReadData(Context& ctx, const Inode& n, uint64_t offset, uint64_t len);
// A symbolic link's target.
absl::StatusOr<std::string> LinkTarget(Context& ctx, const Inode& link);

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_INODE_H_
