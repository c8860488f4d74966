// The DFS as a FUSE file system (libfuse3's low-level API): every kernel request becomes one DFS
// operation — one round trip in active mode — through DfsClient. Node ids are DFS inode numbers
// (the root is FUSE's 1); the mount keeps each known node's path, since DFS operations take paths,
// and moves them with renames. docs/mount.md lists the requests, their costs and the caching.
#ifndef ARDMA_APPS_MOUNT_DFS_FUSE_H_
#define ARDMA_APPS_MOUNT_DFS_FUSE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "services/dfs/dfs_client.h"

struct fuse_lowlevel_ops;

namespace ardma::mount {

struct MountOptions {
  double attr_timeout = 1.0;   // seconds the kernel may keep a node's attributes
  double entry_timeout = 1.0;  // seconds it may keep a name -> node lookup
  bool writeback_cache = false;
  uint32_t max_write = 1u << 20;
};

// The errno for a DFS error (EIO for the server being unreachable or anything unexpected).
int ErrnoFor(const absl::Status& status);

class DfsFuse {
 public:
  // `root_ino`: the DFS inode of "/" (its node id is FUSE's 1).
  DfsFuse(dfs::DfsClient* fs, MountOptions options, uint64_t root_ino);
  DfsFuse(const DfsFuse&) = delete;
  DfsFuse& operator=(const DfsFuse&) = delete;

  // The operations to hand fuse_session_new (userdata: this object).
  static const fuse_lowlevel_ops& Operations();

  // ---- used by the operations (dfs_fuse.cc) ----
  dfs::DfsClient& fs() { return *fs_; }
  const MountOptions& options() const { return options_; }
  // The path of node `ino`; nullopt if the kernel names a node it was never given.
  std::optional<std::string> PathOf(uint64_t ino);
  std::optional<std::string> ChildPath(uint64_t parent, const char* name);
  // The node id the kernel sees for a DFS inode (the root is 1).
  uint64_t NodeId(uint64_t dfs_ino) const;
  // A lookup count for node `id` at `path` (lookup, create, mkdir, symlink, readdirplus).
  void Remember(uint64_t id, const std::string& path);
  void Forget(uint64_t id, uint64_t nlookup);
  // After a rename: every known node at or below `from` now lives below `to`.
  void Moved(const std::string& from, const std::string& to);
  struct stat ToStat(const dfs::Stat& s) const;
  struct stat ToStat(const dfs::DirEntry& e) const;
  // Open files: the DFS handle behind fi->fh.
  uint64_t AddHandle(const dfs::FileHandle& h);
  std::optional<dfs::FileHandle> Handle(uint64_t fh);
  void DropHandle(uint64_t fh);
  // The file handle for inode `ino` without a round trip, once the superblock is known.
  std::optional<dfs::FileHandle> HandleFor(uint64_t dfs_ino);
  // The superblock of an opened file, and whether files keep their bytes on other members (on a
  // cluster every file made there does: docs/dfs.md).
  void LearnSuperblock(const dfs::FileHandle& opened);

 private:
  struct Node {
    std::string path;
    uint64_t lookups = 0;
  };

  dfs::DfsClient* fs_;
  MountOptions options_;
  uid_t uid_;
  gid_t gid_;
  const uint64_t root_ino_;
  absl::Mutex mu_;
  uint64_t sb_ ABSL_GUARDED_BY(mu_) = 0;
  bool remote_ ABSL_GUARDED_BY(mu_) = false;
  std::unordered_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, dfs::FileHandle> handles_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace ardma::mount

#endif  // ARDMA_APPS_MOUNT_DFS_FUSE_H_
