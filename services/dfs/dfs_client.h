// DfsClient: what an application embeds to use an ardmad's in-memory file system.
//
//   ARDMA_ASSIGN_OR_RETURN(auto client, ardma::Client::Connect("127.0.0.1:15712"));
//   ardma::dfs::DfsClient fs(client.get(), ardma::Mode::kActive);   // file system "default"
//   ARDMA_RETURN_IF_ERROR(fs.Mkdir("/logs").status());
//   ARDMA_RETURN_IF_ERROR(fs.WriteFile("/logs/today", "hello\n"));
//   ARDMA_ASSIGN_OR_RETURN(std::string text, fs.ReadFile("/logs/today"));
//   ARDMA_ASSIGN_OR_RETURN(ardma::dfs::Stat st, fs.Lookup("/logs/today"));   // st.size == 6
//   ARDMA_RETURN_IF_ERROR(fs.Rename("/logs", "/old-logs"));
//
// Paths are absolute POSIX paths ("." and ".." allowed, components up to 255 bytes). Errors:
// NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION (not a directory, is a directory, directory not
// empty), INVALID_ARGUMENT (bad path, moving a directory into itself, request too large),
// RESOURCE_EXHAUSTED (server memory full; the file system stays consistent).
//
// Mode::kActive: every call below is one EXECUTE (one round trip), except ListDir / ReadFile /
// WriteFile, which page through several. Mode::kRdma: the same functions run here over one-sided
// operations (many round trips; docs/dfs.md). File systems are created on first use.
//
// Borrows the Client for its lifetime. Thread-safe.
#ifndef ARDMA_SERVICES_DFS_DFS_CLIENT_H_
#define ARDMA_SERVICES_DFS_DFS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/active/active_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/servers.h"
#include "services/dfs/dfs_format.h"

ARDMA_DECLARE_ACTIVE_LIBRARY(dfs);

namespace ardma::dfs {

// An open file (POSIX-like: it follows the file through renames; NOT_FOUND once removed).
struct FileHandle {
  uint64_t sb = 0;
  uint64_t ino = 0;
  bool remote = false;  // on a cluster: its bytes are on its data slot's member (docs/dfs.md)
};

class DfsClient {
 public:
  DfsClient(Client* client, Mode mode, std::string fs = "default", CallOptions options = {})
      : one_(std::make_unique<OneServer>(client)), servers_(one_.get()), mode_(mode),
        fs_(std::move(fs)), options_(options) {}
  // Over a cluster (a cluster::Cluster as the Servers): the namespace is on the member that owns
  // the file system's slot, each file's bytes on the member that owns its data slot; handles
  // read and write there directly. Active mode only: RDMA mode's calls are FAILED_PRECONDITION.
  DfsClient(Servers* servers, Mode mode, std::string fs = "default", CallOptions options = {})
      : servers_(servers), mode_(mode), fs_(std::move(fs)), options_(options) {}

  absl::StatusOr<Stat> Mkdir(std::string_view path, uint32_t mode = 0755);
  // A new empty file; with exclusive=false an existing file is fine (and left as it is).
  absl::StatusOr<Stat> Create(std::string_view path, uint32_t mode = 0644, bool exclusive = true);
  // lstat(2). Paths follow symbolic links as the kernel's do: every one before the last
  // component; the last one in LookupFollowing, Open, ReadDir and the data operations (Read,
  // Write, Truncate, Copy's source...), never in the operations on names (Unlink, Rename...).
  absl::StatusOr<Stat> Lookup(std::string_view path);
  // stat(2): a link at the end of `path` is followed too.
  absl::StatusOr<Stat> LookupFollowing(std::string_view path);
  // symlink(2): a link at `path` whose target is `target` (stored as given, never resolved).
  absl::StatusOr<Stat> Symlink(std::string_view target, std::string_view path);
  // readlink(2); INVALID_ARGUMENT if `path` is not a symbolic link.
  absl::StatusOr<std::string> Readlink(std::string_view path);
  // The path with every symbolic link in it resolved here, as the kernel resolves a path (relative
  // targets against the link's directory; the last component only if `follow_last`); FAILED_
  // PRECONDITION "too many levels of symbolic links" after 40. One lookup per component and link.
  absl::StatusOr<std::string> FollowLinks(std::string_view path, bool follow_last = true);
  absl::StatusOr<DirPage> ReadDir(std::string_view path, uint64_t cursor = 0, uint32_t max = 1024);
  absl::StatusOr<std::vector<DirEntry>> ListDir(std::string_view path);  // every page
  absl::Status Unlink(std::string_view path);
  absl::Status Rmdir(std::string_view path);
  // Files and whole directories; an existing target of the same kind is replaced (a directory
  // only if empty), as rename(2) does.
  absl::Status Rename(std::string_view from, std::string_view to);

  // Up to `len` bytes at `offset` (fewer at the end of the file; holes read as zeros).
  absl::StatusOr<std::string> Read(std::string_view path, uint64_t offset, uint64_t len);
  // Writes at `offset`, growing the file (with a hole if past its end). Returns the new size.
  absl::StatusOr<uint64_t> Write(std::string_view path, uint64_t offset, std::string_view data);
  absl::Status Truncate(std::string_view path, uint64_t len);  // the paper's setLen
  absl::StatusOr<uint64_t> GetLen(std::string_view path);
  // Block `index` of kBlockSize bytes (the paper's getBlock / setBlock).
  absl::StatusOr<std::string> GetBlock(std::string_view path, uint64_t index);
  absl::Status SetBlock(std::string_view path, uint64_t index, std::string_view data);
  // Copies a file on the server (one request); an existing file at `to` is overwritten.
  absl::StatusOr<Stat> Copy(std::string_view from, std::string_view to);
  // Everything under `path` (itself first, depth 0), depth first, a page at a time; a
  // directory's entries in creation order; nothing deeper than `max_depth`. A link at `path` is
  // the one entry, unless `follow_start` (find -H): then its target is walked, named `path`.
  absl::StatusOr<FindPage> Find(std::string_view path, std::string_view cursor = "",
                                uint32_t max = 1024, uint32_t max_depth = UINT32_MAX,
                                bool follow_start = false);
  absl::StatusOr<Usage> GetUsage();

  // File handles skip path resolution: in RDMA mode a read is then 4 round trips (inode, block
  // table, data, generation check) instead of one per path component more.
  absl::StatusOr<FileHandle> Open(std::string_view path);
  absl::StatusOr<std::string> ReadAt(const FileHandle& file, uint64_t offset, uint64_t len);
  absl::StatusOr<uint64_t> WriteAt(const FileHandle& file, uint64_t offset, std::string_view data);

  // Streams `data` into `path` (created or truncated) in `chunk`-byte writes, keeping up to
  // `window` in flight in active mode (one at a time in RDMA mode). `progress` gets the bytes done.
  absl::Status Upload(std::string_view path, std::string_view data, uint32_t mode = 0644,
                      const std::function<void(uint64_t)>& progress = nullptr,
                      uint64_t chunk = 1u << 20, int window = 8);
  // Streams `path` to `sink(offset, bytes)` (called from client threads, chunks in any order) the
  // same way. Returns the file's size.
  absl::StatusOr<uint64_t> Download(
      std::string_view path,
      const std::function<absl::Status(uint64_t offset, std::string_view bytes)>& sink,
      const std::function<void(uint64_t)>& progress = nullptr, uint64_t chunk = 1u << 20,
      int window = 8);
  // Sets a file's or directory's permission bits and (if not InfinitePast) modification time.
  absl::Status SetAttributes(std::string_view path, uint32_t mode,
                             absl::Time mtime = absl::InfinitePast());
  // Copies the directory tree `from` to `to` on the server, in one request: directories are
  // created (or merged into, if present), files copied (existing ones overwritten unless
  // no_clobber), symbolic links copied as links; with preserve, modes and mtimes kept, else what
  // is created gets the source's mode less `umask`. Returns files and directories copied.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> CopyTree(std::string_view from, std::string_view to,
                                                         bool no_clobber = false,
                                                         bool preserve = false, uint32_t umask = 0);

  // Applies `ops` in order in one request (dfs_format.h: BatchOp); one result per operation. Keep
  // a batch's bytes under kMaxIoBytes.
  absl::StatusOr<std::vector<absl::Status>> Batch(std::span<const BatchOp> ops);

  // Whole files, in requests of at most kMaxIoBytes.
  absl::StatusOr<std::string> ReadFile(std::string_view path);
  absl::Status WriteFile(std::string_view path, std::string_view data, uint32_t mode = 0644);

  Mode mode() const { return mode_; }
  const std::string& fs() const { return fs_; }

 private:
  // `function` on the member that holds the namespace, following redirects.
  absl::StatusOr<std::string> Call(std::string_view function, std::string_view args);
  // Runs `call(Client&)` on the server that holds `slot`, with the library loaded on every one.
  using SlotCall = std::function<absl::StatusOr<std::string>(Client&)>;
  absl::StatusOr<std::string> OnSlot(uint32_t slot, const SlotCall& call);
  // A handle's call: straight to the file's bytes on a cluster (`cluster_function`, with the fs
  // name and inode first), else `function` with the handle first (and the fs name last).
  absl::StatusOr<std::string> HandleCall(const FileHandle& file, std::string_view function,
                                         std::string_view cluster_function,
                                         std::string_view rest, std::string_view cluster_rest);
  // The server a handle's pipelined transfer (Upload, Download) sends its requests to.
  absl::StatusOr<Client*> HandleClient(const FileHandle& file);
  absl::Status LoadEverywhere();
  bool Direct(const FileHandle& file) const;  // a handle's calls go to its bytes' member
  absl::StatusOr<Stat> StatCall(std::string_view path, bool follow);
  absl::StatusOr<std::pair<FileHandle, Stat>> OpenWithStat(std::string_view path);
  std::string Args() const;  // the fs name, then the function's own arguments

  std::unique_ptr<OneServer> one_;  // when given one Client
  Servers* const servers_;
  const Mode mode_;
  const std::string fs_;
  const CallOptions options_;
  absl::Mutex mu_;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;  // the library is on every server (a cluster)
};

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_CLIENT_H_
