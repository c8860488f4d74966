// The in-memory distributed file system's layout, limits and argument encodings, shared by the
// active code (dfs.h and dfs_inode.h, on the server or, in RDMA mode, on the client) and
// DfsClient.
//
// A file system is named (1 to kMaxFsNameBytes bytes); its superblock hangs off the heap root
// "dfs:<name>" and its directory entries live in the DHT table "dfs.<name>": key = parent inode
// (8 bytes, little-endian) + entry name, value = child inode (8 bytes) + type (1 byte). Inodes are
// 512-byte heap blocks; an inode number is its address.
//
// Superblock (64 B): +0 magic "ARDMADFS", +8 root inode, +16 rename lock (cross-directory renames
// take it, so no rename can make a directory its own ancestor), +24 files, +32 directories,
// +40 data blocks in use, +48 orphans (removed remote files whose contents are still to be freed:
// dfs_content.h), +56 when orphans were last swept (ns).
//
// Inode (512 B):
//   +0   magic "ARDMAINO" (cleared when freed)   +8   lock word (0 free, else the holder's nonce)
//   +16  type (1 file, 2 dir, 3 symlink)            +24  parent inode (the root is its own parent)
//   +32  size: file bytes / directory entries   +40  mode (permission bits)
//   +48  mtime ns                                +56  ctime ns
//   +64  table: file block table / directory child array (heap block, 8-byte entries; 0 = none)
//   +72  table capacity (entries)                +80  index in the parent's child array
//   +88  generation: +1 on every change (readers check it did not move under them)
//   +96  name length                             +104 name (up to kMaxNameBytes)
//   +360 removed (a removed directory takes no new entries)
//   +368 contents elsewhere: 1 for a file whose bytes live on the cluster member that owns its
//        data slot (DataSlot); its size, mtime and ctime here are that member's, copied back
//        after every change, and +376 is the content generation they were copied at
//
// File data lives in blocks of up to kBlockSize bytes listed by the block table (tables and child
// arrays are sized to fill their heap blocks); a 0 entry is a hole and reads as zeros. A block
// holds at least the file's bytes that fall in it but may be smaller than kBlockSize: a small
// file's only block is just big enough for it (16 B to 2 KiB in powers of two, then whole 4 KiB
// pages), and grows (at least doubling, moved with its data) as the file does. So a file of n
// bytes costs its 512-byte inode, n rounded up as above, a table of 2 or more entries (16 B) and
// its directory entry; an empty file has no table. Growing a file grows only its table and its
// last block (entries are copied, data blocks are not).
// Directories list their children (inode numbers) in a child array for readdir; a child knows its
// index, so unlink moves the last child into the gap (O(1)). Namespace changes lock the directory
// (or directories, in address order); writes lock the file. A lock word left by a client that died
// is taken over once its connection has closed (services/lock_word.h).
#ifndef ARDMA_SERVICES_DFS_DFS_FORMAT_H_
#define ARDMA_SERVICES_DFS_DFS_FORMAT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma::dfs {

// The largest data block: a run of 16 heap pages.
inline constexpr uint64_t kBlockSize = 64 * 1024;
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxFsNameBytes = 39;
inline constexpr uint64_t kMaxIoBytes = 16u << 20;  // one read or write request

inline constexpr uint64_t kSuperMagic = 0x5346444d41445241ull;  // "ARDMADFS"
inline constexpr uint64_t kInodeMagic = 0x4f4e49414d445241ull;  // "ARDMAINO"
inline constexpr uint64_t kSuperBytes = 64;
inline constexpr uint64_t kInodeBytes = 512;  // a 512-byte heap block

// Superblock fields.
inline constexpr uint64_t kSbRoot = 8, kSbRenameLock = 16, kSbFiles = 24, kSbDirs = 32,
                          kSbBlocks = 40, kSbOrphans = 48, kSbSwept = 56;
// Inode fields.
inline constexpr uint64_t kInLock = 8, kInType = 16, kInParent = 24, kInSize = 32, kInMode = 40,
                          kInMtime = 48, kInCtime = 56, kInTable = 64, kInCapacity = 72,
                          kInIndex = 80, kInGen = 88, kInNameLen = 96, kInName = 104,
                          kInRemoved = 360, kInRemote = 368, kInDataGen = 376;

// A symbolic link is stored like a file whose data is its target; the DFS never follows one
// (every path component must be a directory), so loops are the walker's problem, not the server's.
enum class FileType : uint8_t { kFile = 1, kDirectory = 2, kSymlink = 3 };
inline constexpr bool ValidFileType(uint64_t t) { return t >= 1 && t <= 3; }

struct Stat {
  uint64_t ino = 0;
  FileType type = FileType::kFile;
  uint64_t size = 0;  // bytes; for a directory, its number of entries
  uint32_t mode = 0;
  absl::Time mtime, ctime;
};

struct DirEntry {
  std::string name;
  FileType type = FileType::kFile;
  uint64_t ino = 0;
  // The entry's stat, read with it (what readdirplus needs): size, permission bits, times.
  uint64_t size = 0;
  uint32_t mode = 0;
  absl::Time mtime, ctime;
};

struct DirPage {
  std::vector<DirEntry> entries;
  uint64_t next = 0;  // cursor for the next page
  bool done = false;
};

// One match of find: the path below the starting directory, e.g. "/a/b".
struct FoundEntry {
  std::string path;
  FileType type = FileType::kFile;
  uint64_t size = 0;   // bytes; for a directory, its number of entries
  uint32_t depth = 0;  // 0 for the starting point
  uint32_t mode = 0;
  absl::Time mtime;
  uint64_t ino = 0;
};
struct FindPage {
  std::vector<FoundEntry> entries;
  std::string next;  // opaque cursor; empty when done
  bool done = false;
};

struct Usage {
  uint64_t files = 0, directories = 0, data_blocks = 0;
  uint64_t heap_size = 0, heap_allocated = 0;
  // On a cluster: removed files whose bytes a member that was down still holds, to be freed
  // when it is back (docs/dfs.md).
  uint64_t orphans = 0;
};

// One change of dfs.batch (applied in order, each with its own result): a directory (an existing
// one is fine), a whole file (created, or truncated and rewritten), a symbolic link (`data` is its
// target; replaces an existing non-directory) or attributes only. Mode bits apply to what is
// created; kBatchSetMode / kBatchSetMtime also set them on what exists (cp -p).
enum class BatchKind : uint8_t { kMkdir = 1, kPut = 2, kSymlink = 3, kSetAttr = 4 };
inline constexpr uint8_t kBatchKeepExisting = 1;  // cp -n: an existing name is left alone
inline constexpr uint8_t kBatchSetMode = 2;
inline constexpr uint8_t kBatchSetMtime = 4;
inline constexpr uint8_t kBatchKeepNewer = 8;  // cp -u: an existing file not older is left alone
inline constexpr uint32_t kMaxBatchOps = 65536;
struct BatchOp {
  BatchKind kind = BatchKind::kPut;
  uint8_t flags = 0;
  uint32_t mode = 0;
  uint64_t mtime_ns = 0;
  std::string_view path, data;  // views into the request (or the caller's buffers)
};

// On a cluster (docs/dfs.md, "One file system across a cluster") a file system's namespace
// (superblock, inodes, directory entries) lives on the member that owns NamespaceSlot(fs), and
// each file's bytes on the member that owns DataSlot(fs, ino).
inline constexpr std::string_view kNamespaceSpace = "dfs";
uint32_t NamespaceSlot(std::string_view fs);
uint32_t DataSlot(std::string_view fs, uint64_t ino);
// dfs.cwrite's flags (dfs_content.h).
inline constexpr uint8_t kTruncateFirst = 1;  // empty the file, then write
inline constexpr uint8_t kSyncNamespace = 2;  // send the new state to the namespace's member

// INVALID_ARGUMENT unless `name` is a valid file system name.
absl::Status CheckFsName(std::string_view name);
// Splits an absolute path into its components ("." and ".." kept, empty ones dropped).
// INVALID_ARGUMENT: not absolute, too long, a component over kMaxNameBytes, or a NUL byte.
absl::StatusOr<std::vector<std::string_view>> SplitPath(std::string_view path);

// The errno a DFS error stands for (ENOENT for NOT_FOUND, ENOTDIR for "not a directory", ELOOP
// for too many links...), 0 for OK and for an error no errno fits (the server unreachable...).
int ErrnoOf(const absl::Status& s);
// What the GNU tools print for a DFS error: strerror's text ("No such file or directory"), or
// the status's own message when no errno fits or it says more (invalid arguments, permissions).
std::string ErrnoText(const absl::Status& s);

std::string EncodeStat(const Stat& s);
absl::StatusOr<Stat> DecodeStat(std::string_view bytes);
// dfs.find's result: next, done, then the entries.
// dfs.readdir's result: next:u64 done:u8 n:u32 n x (ino:u64 type:u8 name:Str16 size:u64
// mode:u32 mtime:u64 ctime:u64).
std::string EncodeDirPage(const DirPage& page);
absl::StatusOr<DirPage> DecodeDirPage(std::string_view bytes);
std::string EncodeFindPage(const FindPage& page);
// dfs.batch's operations (after the fs name): n:u32 n x (kind:u8 flags:u8 mode:u32 mtime:u64
// path:Str16 data:Bytes32); its result: n:u32 n x (code:u16 message:Str16).
void EncodeBatchOps(std::span<const BatchOp> ops, std::string* out);
absl::StatusOr<std::vector<BatchOp>> DecodeBatchOps(std::string_view bytes);
std::string EncodeBatchResults(std::span<const absl::Status> results);
absl::StatusOr<std::vector<absl::Status>> DecodeBatchResults(std::string_view bytes);
absl::StatusOr<FindPage> DecodeFindPage(std::string_view bytes);

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_FORMAT_H_
