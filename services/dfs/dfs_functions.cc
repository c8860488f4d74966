// The "dfs" active-code library: a hierarchical in-memory file system (layout: dfs_format.h).
// Directory entries live in the DHT, reached with Call("dht.*") — on the server in active mode, so
// every operation below is one EXECUTE. Every function's arguments start with Str16 fs-name.
//
//   dfs.mkdir    path:Str16 mode:u32                         -> stat
//   dfs.create   path:Str16 mode:u32 exclusive:u8            -> stat
//   dfs.stat     path:Str16                                  -> stat
//   dfs.readdir  path:Str16 cursor:u64 max:u32               -> next:u64 done:u8 n:u32
//                                                               n x (ino:u64 type:u8 name:Str16)
//   dfs.unlink   path:Str16                                  -> ""
//   dfs.rmdir    path:Str16                                  -> ""
//   dfs.rename   from:Str16 to:Str16                         -> ""
//   dfs.read     path:Str16 offset:u64 len:u64               -> bytes (short at end of file)
//   dfs.write    path:Str16 offset:u64 data:Bytes32          -> size:u64
//   dfs.truncate path:Str16 len:u64                          -> ""
//   dfs.copy     from:Str16 to:Str16                         -> stat of the copy
//   dfs.find     path:Str16 cursor:Bytes32 max:u32 [max_depth:u32]
//                                                            -> next:Bytes32 done:u8 n:u32
//                                    n x (path:Str16 type:u8 size:u64 depth:u32 mode:u32 mtime:u64)
//   dfs.usage    ()                                          -> files dirs blocks heap_allocated
//   dfs.setattr  path:Str16 mode:u32 mtime_ns:u64 (0: keep)  -> ""
//   dfs.copytree from:Str16 to:Str16 no_clobber:u8 preserve:u8 -> files:u64 dirs:u64
//   dfs.open     path:Str16                                  -> sb:u64 stat (a file handle)
// File handles (POSIX-like: they follow the inode through renames) skip path resolution; these two
// take the handle instead of the fs name:
//   dfs.pread    sb:u64 ino:u64 offset:u64 len:u64           -> bytes
//   dfs.pwrite   sb:u64 ino:u64 offset:u64 data:Bytes32      -> size:u64
#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <tuple>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs_format.h"
#include "services/dht/dht_format.h"

namespace ardma::dfs {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

constexpr int kMaxRetries = 1000;
constexpr uint32_t kMaxPage = 10000;

uint64_t Random64() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

std::string U64Bytes(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// ---- File system, inodes ----

struct Fs {
  std::string name;
  std::string table;  // DHT table of directory entries
  uint64_t sb = 0;
  uint64_t root = 0;
};

struct Inode {
  uint64_t ino = 0;
  FileType type = FileType::kFile;
  uint64_t parent = 0, size = 0, table = 0, capacity = 0, index = 0, gen = 0;
  uint32_t mode = 0;
  int64_t mtime = 0, ctime = 0;
  bool removed = false;
  std::string name;

  Stat ToStat() const {
    return Stat{ino, type, size, mode, absl::FromUnixNanos(mtime), absl::FromUnixNanos(ctime)};
  }
};

uint64_t Field(const char* bytes, uint64_t offset) {
  uint64_t v;
  std::memcpy(&v, bytes + offset, 8);
  return v;
}

// NotFound if `ino` is not a live inode (removed, or never one).
absl::StatusOr<Inode> ReadInode(Context& ctx, uint64_t ino) {
  char b[kInodeBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(ino, std::span<char>(b, sizeof(b))));
  if (Field(b, 0) != kInodeMagic) return absl::NotFoundError("dfs: no such file or directory");
  Inode n;
  n.ino = ino;
  uint64_t type = Field(b, kInType);
  if (type != 1 && type != 2) return absl::DataLossError("dfs: bad inode type");
  n.type = static_cast<FileType>(type);
  n.parent = Field(b, kInParent);
  n.size = Field(b, kInSize);
  n.mode = static_cast<uint32_t>(Field(b, kInMode));
  n.mtime = static_cast<int64_t>(Field(b, kInMtime));
  n.ctime = static_cast<int64_t>(Field(b, kInCtime));
  n.table = Field(b, kInTable);
  n.capacity = Field(b, kInCapacity);
  n.index = Field(b, kInIndex);
  n.gen = Field(b, kInGen);
  uint64_t len = std::min<uint64_t>(Field(b, kInNameLen), kMaxNameBytes);
  n.name.assign(b + kInName, len);
  n.removed = Field(b, kInRemoved) != 0;
  return n;
}

absl::StatusOr<uint64_t> NewInode(Context& ctx, FileType type, uint64_t parent,
                                  std::string_view name, uint32_t mode) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, heap::Allocate(ctx, kInodeBytes));
  char b[kInodeBytes] = {};
  auto put = [&](uint64_t off, uint64_t v) { std::memcpy(b + off, &v, 8); };
  int64_t now = NowNs();
  put(0, kInodeMagic);
  put(kInType, static_cast<uint64_t>(type));
  put(kInParent, parent == 0 ? ino : parent);
  put(kInMode, mode);
  put(kInMtime, static_cast<uint64_t>(now));
  put(kInCtime, static_cast<uint64_t>(now));
  put(kInGen, Random64() & ~1ull);  // even: not being written; random: a reused block differs
  put(kInNameLen, name.size());
  std::memcpy(b + kInName, name.data(), name.size());
  absl::Status s = ctx.Write(ino, std::string_view(b, sizeof(b)));
  if (!s.ok()) {
    heap::Free(ctx, ino).IgnoreError();
    return s;
  }
  return ino;
}

// Frees an inode that nobody can reach any more, with its table and data blocks.
absl::Status FreeInode(Context& ctx, const Fs& fs, const Inode& n) {
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino, 0));  // readers holding the number see it gone
  if (n.table != 0) {
    if (n.type == FileType::kFile) {
      std::vector<uint64_t> blocks(n.capacity);
      ARDMA_RETURN_IF_ERROR(ctx.Read(
          n.table, std::span<char>(reinterpret_cast<char*>(blocks.data()), 8 * blocks.size())));
      uint64_t freed = 0;
      for (uint64_t b : blocks) {
        if (b != 0) {
          ARDMA_RETURN_IF_ERROR(heap::Free(ctx, b));
          ++freed;
        }
      }
      if (freed > 0) ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbBlocks, -freed).status());
    }
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, n.table));
  }
  ARDMA_RETURN_IF_ERROR(
      ctx.FetchAdd(fs.sb + (n.type == FileType::kFile ? kSbFiles : kSbDirs), ~0ull).status());
  return heap::Free(ctx, n.ino);
}

absl::StatusOr<Fs> OpenFs(Context& ctx, ByteReader& r) {
  std::string_view name;
  if (!r.Str16(&name)) return absl::InvalidArgumentError("dfs: missing file system name");
  ARDMA_RETURN_IF_ERROR(CheckFsName(name));
  Fs fs;
  fs.name = std::string(name);
  fs.table = absl::StrCat("dfs.", ToAbsl(name));
  std::string root_name = absl::StrCat("dfs:", ToAbsl(name));
  absl::StatusOr<uint64_t> sb = heap::GetRoot(ctx, root_name);
  if (absl::IsNotFound(sb.status())) {
    // First use: a superblock and a root directory, published by the root name (one wins).
    ARDMA_ASSIGN_OR_RETURN(uint64_t mine, heap::Allocate(ctx, kSuperBytes));
    absl::StatusOr<uint64_t> root = NewInode(ctx, FileType::kDirectory, 0, "", 0755);
    if (!root.ok()) {
      heap::Free(ctx, mine).IgnoreError();
      return root.status();
    }
    char b[kSuperBytes] = {};
    uint64_t magic = kSuperMagic, dirs = 1;
    std::memcpy(b, &magic, 8);
    std::memcpy(b + kSbRoot, &*root, 8);
    std::memcpy(b + kSbDirs, &dirs, 8);
    absl::Status written = ctx.Write(mine, std::string_view(b, sizeof(b)));
    sb = written.ok() ? heap::GetOrCreateRoot(ctx, root_name, mine)
                      : absl::StatusOr<uint64_t>(written);
    if (!sb.ok() || *sb != mine) {
      heap::Free(ctx, *root).IgnoreError();
      heap::Free(ctx, mine).IgnoreError();
    }
  }
  if (!sb.ok()) return sb.status();
  fs.sb = *sb;
  char b[16];
  ARDMA_RETURN_IF_ERROR(ctx.Read(fs.sb, std::span<char>(b, sizeof(b))));
  if (Field(b, 0) != kSuperMagic) return absl::DataLossError("dfs: bad superblock");
  fs.root = Field(b, kSbRoot);
  return fs;
}

// ---- Directory entries (the DHT) ----

struct Entry {
  uint64_t ino = 0;
  FileType type = FileType::kFile;
};

std::string EntryKey(uint64_t parent, std::string_view name) {
  return absl::StrCat(ToAbsl(U64Bytes(parent)), ToAbsl(name));
}

std::string TableArgs(const Fs& fs) {
  std::string out;
  dht::EncodeTarget(dht::Target{fs.table}, &out);
  return out;
}

absl::StatusOr<std::optional<Entry>> LookupEntry(Context& ctx, const Fs& fs, uint64_t parent,
                                                 std::string_view name) {
  absl::StatusOr<std::string> got =
      ctx.Call("dht.get", TableArgs(fs) + dht::EncodeKeyArgs(EntryKey(parent, name)));
  if (absl::IsNotFound(got.status())) return std::nullopt;  // no table yet
  if (!got.ok()) return got.status();
  ARDMA_ASSIGN_OR_RETURN(dht::Reply reply, dht::DecodeReply(*got, dht::ReplyKind::kFlagAndValue));
  if (!reply.flag) return std::nullopt;
  if (!reply.value.has_value() || reply.value->size() != 9) {
    return absl::DataLossError("dfs: bad directory entry");
  }
  Entry e;
  std::memcpy(&e.ino, reply.value->data(), 8);
  e.type = static_cast<FileType>((*reply.value)[8]);
  return e;
}

std::string EntryValue(const Entry& e) {
  return U64Bytes(e.ino) + std::string(1, static_cast<char>(e.type));
}

absl::Status PutEntry(Context& ctx, const Fs& fs, uint64_t parent, std::string_view name,
                      const Entry& e) {
  return ctx.Call("dht.put", TableArgs(fs) + dht::EncodePutArgs(EntryKey(parent, name), EntryValue(e)))
      .status();
}

absl::Status RemoveEntry(Context& ctx, const Fs& fs, uint64_t parent, std::string_view name) {
  return ctx.Call("dht.remove", TableArgs(fs) + dht::EncodeKeyArgs(EntryKey(parent, name))).status();
}

// ---- Locks ----

// Takes the lock word at `addr`; a word unchanged for kLockStealAfter is taken over (its holder
// died). Returns the nonce to unlock with.
absl::StatusOr<uint64_t> Lock(Context& ctx, uint64_t addr) {
  uint64_t nonce = Random64() | 1;
  uint64_t seen = 0;
  absl::Time since = absl::Now();
  for (int round = 0; round < (1 << 30); ++round) {
    ARDMA_ASSIGN_OR_RETURN(CasResult cas, ctx.CompareAndSwap(addr, 0, nonce));
    if (cas.swapped) return nonce;
    if (cas.observed != seen) {
      seen = cas.observed;
      since = absl::Now();
    } else if (absl::Now() - since > kLockStealAfter) {
      ARDMA_ASSIGN_OR_RETURN(CasResult steal, ctx.CompareAndSwap(addr, seen, nonce));
      if (steal.swapped) return nonce;
    }
    ARDMA_RETURN_IF_ERROR(ctx.Backoff(round));
  }
  return absl::AbortedError("dfs: lock stayed taken");
}

class Locks {
 public:
  explicit Locks(Context& ctx) : ctx_(ctx) {}
  ~Locks() { Release().IgnoreError(); }
  // Locks every word in `addrs` (deduplicated, in address order: no deadlock between operations).
  absl::Status Take(std::vector<uint64_t> addrs) {
    std::sort(addrs.begin(), addrs.end());
    addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
    for (uint64_t a : addrs) {
      absl::StatusOr<uint64_t> nonce = Lock(ctx_, a);
      if (!nonce.ok()) {
        Release().IgnoreError();
        return nonce.status();
      }
      held_.push_back({a, *nonce});
    }
    return absl::OkStatus();
  }
  absl::Status Release() {
    absl::Status status;
    for (auto [addr, nonce] : held_) {
      absl::StatusOr<CasResult> cas = ctx_.CompareAndSwap(addr, nonce, 0);
      if (!cas.ok()) {
        status.Update(cas.status());
      } else if (!cas->swapped) {
        status.Update(absl::AbortedError("dfs: a lock was taken over while held"));
      }
    }
    held_.clear();
    return status;
  }

 private:
  Context& ctx_;
  std::vector<std::pair<uint64_t, uint64_t>> held_;
};

// ---- Paths ----

absl::Status NotADirectory() { return absl::FailedPreconditionError("dfs: not a directory"); }
absl::Status IsADirectory() { return absl::FailedPreconditionError("dfs: is a directory"); }
absl::Status NoSuchEntry(std::string_view path) {
  return absl::NotFoundError(absl::StrCat("dfs: no such file or directory: ", ToAbsl(path)));
}

// The inode `parts` leads to from the root. "." stays, ".." goes to the parent (the root's parent
// is the root); every component before the last must be a directory.
absl::StatusOr<uint64_t> Walk(Context& ctx, const Fs& fs, std::span<const std::string_view> parts,
                              std::string_view path) {
  uint64_t cur = fs.root;
  bool cur_is_dir = true;
  for (std::string_view part : parts) {
    if (!cur_is_dir) return NotADirectory();
    if (part == ".") continue;
    if (part == "..") {
      ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, cur));
      cur = n.parent;
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, LookupEntry(ctx, fs, cur, part));
    if (!e) return NoSuchEntry(path);
    cur = e->ino;
    cur_is_dir = e->type == FileType::kDirectory;
  }
  return cur;
}

absl::StatusOr<uint64_t> Resolve(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  return Walk(ctx, fs, parts, path);
}

struct Place {
  uint64_t parent = 0;
  std::string_view name;
};

// The directory a path's last component lives in, and that name. INVALID_ARGUMENT for "/", or a
// path ending in "." or "..".
absl::StatusOr<Place> ResolvePlace(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  if (parts.empty()) return absl::InvalidArgumentError("dfs: the root has no name to change");
  std::string_view name = parts.back();
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError("dfs: the path must end in a name, not . or ..");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t parent,
                         Walk(ctx, fs, std::span(parts).first(parts.size() - 1), path));
  ARDMA_ASSIGN_OR_RETURN(Inode p, ReadInode(ctx, parent));
  if (p.type != FileType::kDirectory) return NotADirectory();
  return Place{parent, name};
}

// ---- Child arrays ----

absl::Status SetFields(Context& ctx, uint64_t ino,
                       std::initializer_list<std::pair<uint64_t, uint64_t>> fields) {
  std::vector<WriteOp> ops;
  std::vector<uint64_t> values;
  values.reserve(fields.size());
  for (auto [off, v] : fields) values.push_back(v);
  size_t i = 0;
  for (auto [off, v] : fields) {
    ops.push_back({ino + off, std::string_view(reinterpret_cast<const char*>(&values[i++]), 8)});
  }
  return ctx.WriteBatch(ops);
}

// Makes `table` (capacity `capacity`, 8-byte entries) hold at least `need` entries: a new table
// with the old entries copied and the rest zero. Returns the (possibly new) table and capacity.
absl::StatusOr<std::pair<uint64_t, uint64_t>> GrowTable(Context& ctx, uint64_t table,
                                                        uint64_t capacity, uint64_t need) {
  if (need <= capacity) return std::make_pair(table, capacity);
  // At least double, and as many entries as fill the heap block (8 * cap + 16 a power of two).
  uint64_t cap = std::max<uint64_t>({need, 2 * capacity, 6});
  cap = (std::bit_ceil(8 * cap + 16) - 16) / 8;
  ARDMA_ASSIGN_OR_RETURN(uint64_t fresh, heap::Allocate(ctx, 8 * cap));
  std::string bytes(8 * cap, '\0');
  absl::Status s;
  if (table != 0 && capacity > 0) {
    s = ctx.Read(table, std::span<char>(bytes.data(), 8 * capacity));
  }
  if (s.ok()) s = ctx.Write(fresh, bytes);
  if (!s.ok()) {
    heap::Free(ctx, fresh).IgnoreError();
    return s;
  }
  return std::make_pair(fresh, cap);
}

// Adds `child` to directory `dir` (locked). Updates the child's index.
absl::Status AppendChild(Context& ctx, const Inode& dir, uint64_t child) {
  ARDMA_ASSIGN_OR_RETURN(auto grown, GrowTable(ctx, dir.table, dir.capacity, dir.size + 1));
  auto [table, capacity] = grown;
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(table + 8 * dir.size, child));
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(child + kInIndex, dir.size));
  uint64_t now = static_cast<uint64_t>(NowNs());
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, dir.ino,
                                  {{kInTable, table},
                                   {kInCapacity, capacity},
                                   {kInSize, dir.size + 1},
                                   {kInMtime, now},
                                   {kInCtime, now},
                                   {kInGen, dir.gen + 2}}));
  if (table != dir.table && dir.table != 0) ARDMA_RETURN_IF_ERROR(heap::Free(ctx, dir.table));
  return absl::OkStatus();
}

// Takes the child at `index` out of directory `dir` (locked): the last child moves into the gap.
absl::Status RemoveChild(Context& ctx, const Inode& dir, uint64_t index) {
  if (index >= dir.size) return absl::DataLossError("dfs: child index out of range");
  uint64_t last = dir.size - 1;
  if (index != last) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t moved, ctx.ReadU64(dir.table + 8 * last));
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(dir.table + 8 * index, moved));
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(moved + kInIndex, index));
  }
  uint64_t now = static_cast<uint64_t>(NowNs());
  return SetFields(ctx, dir.ino,
                   {{kInSize, last}, {kInMtime, now}, {kInCtime, now}, {kInGen, dir.gen + 2}});
}

// ---- Functions ----

std::string StatResult(const Inode& n) { return EncodeStat(n.ToStat()); }

absl::StatusOr<std::string_view> ParsePath(ByteReader& r) {
  std::string_view path;
  if (!r.Str16(&path)) return absl::InvalidArgumentError("dfs: missing path");
  return path;
}

// mkdir and create.
absl::StatusOr<std::string> Make(Context& ctx, std::string_view args, FileType type) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  uint32_t mode;
  uint8_t exclusive = 1;
  if (!r.U32(&mode) || (type == FileType::kFile && !r.U8(&exclusive)) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  if (parts.empty()) return absl::AlreadyExistsError("dfs: / exists");
  ARDMA_ASSIGN_OR_RETURN(Place place, ResolvePlace(ctx, fs, path));
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({place.parent + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode dir, ReadInode(ctx, place.parent));
  if (dir.removed) return NoSuchEntry(path);
  ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> existing, LookupEntry(ctx, fs, dir.ino, place.name));
  if (existing) {
    if (exclusive || existing->type != type) {
      return absl::AlreadyExistsError(absl::StrCat("dfs: exists: ", ToAbsl(path)));
    }
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, existing->ino));
    return StatResult(n);
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, NewInode(ctx, type, dir.ino, place.name, mode & 07777));
  absl::Status s = PutEntry(ctx, fs, dir.ino, place.name, Entry{ino, type});
  if (s.ok()) {
    s = AppendChild(ctx, dir, ino);
    if (!s.ok()) RemoveEntry(ctx, fs, dir.ino, place.name).IgnoreError();
  }
  if (!s.ok()) {
    ctx.WriteU64(ino, 0).IgnoreError();
    heap::Free(ctx, ino).IgnoreError();
    return s;
  }
  ARDMA_RETURN_IF_ERROR(
      ctx.FetchAdd(fs.sb + (type == FileType::kFile ? kSbFiles : kSbDirs), 1).status());
  ARDMA_RETURN_IF_ERROR(locks.Release());
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  return StatResult(n);
}

absl::StatusOr<std::string> Mkdir(Context& ctx, std::string_view args) {
  return Make(ctx, args, FileType::kDirectory);
}

absl::StatusOr<std::string> Create(Context& ctx, std::string_view args) {
  return Make(ctx, args, FileType::kFile);
}

absl::StatusOr<std::string> StatFn(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.stat: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  return StatResult(n);
}

// A handle for pread / pwrite: the superblock and the file's inode (then its stat).
absl::StatusOr<std::string> Open(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.open: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  if (n.type != FileType::kFile) return IsADirectory();
  std::string out;
  ByteWriter w(&out);
  w.U64(fs.sb);
  w.Bytes(StatResult(n));
  return out;
}

absl::StatusOr<std::string> Readdir(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  uint64_t cursor;
  uint32_t max;
  if (!r.U64(&cursor) || !r.U32(&max) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.readdir: bad arguments");
  }
  max = std::clamp<uint32_t>(max, 1, kMaxPage);
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
  ARDMA_ASSIGN_OR_RETURN(Inode dir, ReadInode(ctx, ino));
  if (dir.type != FileType::kDirectory) return NotADirectory();
  uint64_t end = std::min<uint64_t>(dir.size, cursor + max);
  std::vector<uint64_t> children(end > cursor ? end - cursor : 0);
  if (!children.empty()) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(dir.table + 8 * cursor,
                                   std::span<char>(reinterpret_cast<char*>(children.data()),
                                                   8 * children.size())));
  }
  // The children's names and types, one batch.
  std::vector<std::array<char, kInodeBytes>> inodes(children.size());
  std::vector<ReadOp> ops;
  for (size_t i = 0; i < children.size(); ++i) {
    ops.push_back({children[i], std::span<char>(inodes[i].data(), kInodeBytes)});
  }
  if (!ops.empty()) ARDMA_RETURN_IF_ERROR(ctx.ReadBatch(ops));
  std::string out;
  ByteWriter w(&out);
  w.U64(end);
  w.U8(end >= dir.size ? 1 : 0);
  size_t count_at = out.size();
  w.U32(0);
  uint32_t count = 0;
  for (size_t i = 0; i < children.size(); ++i) {
    const char* b = inodes[i].data();
    if (Field(b, 0) != kInodeMagic) continue;  // removed while we looked
    w.U64(children[i]);
    w.U8(static_cast<uint8_t>(Field(b, kInType)));
    w.Str16(std::string_view(b + kInName, std::min<uint64_t>(Field(b, kInNameLen), kMaxNameBytes)));
    ++count;
  }
  std::memcpy(out.data() + count_at, &count, 4);
  return out;
}

// unlink and rmdir.
absl::StatusOr<std::string> Remove(Context& ctx, std::string_view args, FileType type) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  if (parts.empty()) {
    return type == FileType::kFile ? IsADirectory()
                                   : absl::FailedPreconditionError("dfs: cannot remove /");
  }
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Place place, ResolvePlace(ctx, fs, path));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, LookupEntry(ctx, fs, place.parent, place.name));
    if (!e) return NoSuchEntry(path);
    if (e->type != type) return type == FileType::kFile ? IsADirectory() : NotADirectory();
    Locks locks(ctx);
    ARDMA_RETURN_IF_ERROR(locks.Take({place.parent + kInLock, e->ino + kInLock}));
    // Re-check under the locks: the entry may have moved meanwhile.
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> again,
                           LookupEntry(ctx, fs, place.parent, place.name));
    if (!again || again->ino != e->ino) continue;
    ARDMA_ASSIGN_OR_RETURN(Inode dir, ReadInode(ctx, place.parent));
    ARDMA_ASSIGN_OR_RETURN(Inode victim, ReadInode(ctx, e->ino));
    if (type == FileType::kDirectory && victim.size > 0) {
      return absl::FailedPreconditionError(absl::StrCat("dfs: directory not empty: ", ToAbsl(path)));
    }
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(victim.ino + kInRemoved, 1));
    ARDMA_RETURN_IF_ERROR(RemoveEntry(ctx, fs, dir.ino, place.name));
    ARDMA_RETURN_IF_ERROR(RemoveChild(ctx, dir, victim.index));
    ARDMA_RETURN_IF_ERROR(SetFields(ctx, victim.ino, {{kInGen, victim.gen + 2}}));
    ARDMA_RETURN_IF_ERROR(locks.Release());
    ARDMA_RETURN_IF_ERROR(FreeInode(ctx, fs, victim));
    return std::string();
  }
  return absl::AbortedError("dfs: the entry kept changing");
}

absl::StatusOr<std::string> Unlink(Context& ctx, std::string_view args) {
  return Remove(ctx, args, FileType::kFile);
}

absl::StatusOr<std::string> Rmdir(Context& ctx, std::string_view args) {
  return Remove(ctx, args, FileType::kDirectory);
}

absl::StatusOr<std::string> Rename(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view from, ParsePath(r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view to, ParsePath(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.rename: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> from_parts, SplitPath(from));
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> to_parts, SplitPath(to));
  if (from_parts.empty() || to_parts.empty()) {
    return absl::InvalidArgumentError("dfs: cannot rename / or onto /");
  }
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    // Renames are serialised by the superblock's rename lock, so the tree cannot change shape
    // under the ancestor check below.
    Locks rename_lock(ctx);
    ARDMA_RETURN_IF_ERROR(rename_lock.Take({fs.sb + kSbRenameLock}));
    ARDMA_ASSIGN_OR_RETURN(Place src, ResolvePlace(ctx, fs, from));
    ARDMA_ASSIGN_OR_RETURN(Place dst, ResolvePlace(ctx, fs, to));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> moving, LookupEntry(ctx, fs, src.parent, src.name));
    if (!moving) return NoSuchEntry(from);
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> target, LookupEntry(ctx, fs, dst.parent, dst.name));
    if (target && target->ino == moving->ino) return std::string();  // the same file
    if (moving->type == FileType::kDirectory) {
      // Not into itself or below itself.
      for (uint64_t a = dst.parent;;) {
        if (a == moving->ino) {
          return absl::InvalidArgumentError("dfs: cannot move a directory into itself");
        }
        if (a == fs.root) break;
        ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, a));
        a = n.parent;
      }
    }
    if (target) {
      if (moving->type == FileType::kFile && target->type == FileType::kDirectory) {
        return IsADirectory();
      }
      if (moving->type == FileType::kDirectory && target->type == FileType::kFile) {
        return NotADirectory();
      }
    }
    std::vector<uint64_t> words = {src.parent + kInLock, dst.parent + kInLock,
                                   moving->ino + kInLock};
    if (target) words.push_back(target->ino + kInLock);
    Locks locks(ctx);
    ARDMA_RETURN_IF_ERROR(locks.Take(words));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> moving2, LookupEntry(ctx, fs, src.parent, src.name));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> target2, LookupEntry(ctx, fs, dst.parent, dst.name));
    if (!moving2 || moving2->ino != moving->ino || target.has_value() != target2.has_value() ||
        (target && target2->ino != target->ino)) {
      continue;  // changed before we locked: start again
    }
    std::optional<Inode> replaced;
    if (target) {
      ARDMA_ASSIGN_OR_RETURN(Inode t, ReadInode(ctx, target->ino));
      if (t.type == FileType::kDirectory && t.size > 0) {
        return absl::FailedPreconditionError(absl::StrCat("dfs: directory not empty: ", ToAbsl(to)));
      }
      ARDMA_ASSIGN_OR_RETURN(Inode dst_dir, ReadInode(ctx, dst.parent));
      ARDMA_RETURN_IF_ERROR(ctx.WriteU64(t.ino + kInRemoved, 1));
      ARDMA_RETURN_IF_ERROR(RemoveChild(ctx, dst_dir, t.index));
      replaced = t;
    }
    ARDMA_ASSIGN_OR_RETURN(Inode src_dir, ReadInode(ctx, src.parent));
    ARDMA_ASSIGN_OR_RETURN(Inode m, ReadInode(ctx, moving->ino));
    ARDMA_RETURN_IF_ERROR(RemoveEntry(ctx, fs, src.parent, src.name));
    ARDMA_RETURN_IF_ERROR(PutEntry(ctx, fs, dst.parent, dst.name, *moving));
    ARDMA_RETURN_IF_ERROR(RemoveChild(ctx, src_dir, m.index));
    ARDMA_ASSIGN_OR_RETURN(Inode dst_dir, ReadInode(ctx, dst.parent));  // after the removals
    ARDMA_RETURN_IF_ERROR(AppendChild(ctx, dst_dir, m.ino));
    char name[kMaxNameBytes] = {};
    std::memcpy(name, dst.name.data(), dst.name.size());
    uint64_t now = static_cast<uint64_t>(NowNs());
    WriteOp ops[] = {{m.ino + kInName, std::string_view(name, sizeof(name))}};
    ARDMA_RETURN_IF_ERROR(ctx.WriteBatch(ops));
    ARDMA_RETURN_IF_ERROR(SetFields(ctx, m.ino,
                                    {{kInParent, dst.parent},
                                     {kInNameLen, dst.name.size()},
                                     {kInCtime, now},
                                     {kInGen, m.gen + 2}}));
    ARDMA_RETURN_IF_ERROR(locks.Release());
    ARDMA_RETURN_IF_ERROR(rename_lock.Release());
    if (replaced) ARDMA_RETURN_IF_ERROR(FreeInode(ctx, fs, *replaced));
    return std::string();
  }
  return absl::AbortedError("dfs: the entries kept changing");
}

// ---- File data ----

// The file at `path`, checked to be a file.
absl::StatusOr<uint64_t> ResolveFile(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  if (n.type != FileType::kFile) return IsADirectory();
  return ino;
}

// Whether inode `n` is still as it was read: same magic and generation (one READ). Readers take
// data only if this holds afterwards (a seqlock on the generation).
absl::StatusOr<bool> Unchanged(Context& ctx, const Inode& n) {
  char b[kInGen + 8];
  ARDMA_RETURN_IF_ERROR(ctx.Read(n.ino, std::span<char>(b, sizeof(b))));
  return Field(b, 0) == kInodeMagic && Field(b, kInGen) == n.gen;
}

// Reads [offset, offset + len) of file inode `n` (clipped to its size) into a string.
absl::StatusOr<std::string> ReadData(Context& ctx, const Inode& n, uint64_t offset, uint64_t len) {
  if (offset >= n.size) return std::string();
  len = std::min(len, n.size - offset);
  std::string out(len, '\0');
  if (len == 0) return out;
  uint64_t first = offset / kBlockSize, last = (offset + len - 1) / kBlockSize;
  uint64_t in_table = n.table == 0 ? 0 : std::min(last + 1, n.capacity);
  std::vector<uint64_t> blocks(last - first + 1, 0);
  if (in_table > first) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(
        n.table + 8 * first,
        std::span<char>(reinterpret_cast<char*>(blocks.data()), 8 * (in_table - first))));
  }
  std::vector<ReadOp> ops;
  for (uint64_t b = first; b <= last; ++b) {
    uint64_t block = blocks[b - first];
    if (block == 0) continue;  // a hole: zeros
    uint64_t from = std::max(offset, b * kBlockSize);
    uint64_t to = std::min(offset + len, (b + 1) * kBlockSize);
    ops.push_back({block + (from - b * kBlockSize),
                   std::span<char>(out.data() + (from - offset), to - from)});
  }
  if (!ops.empty()) ARDMA_RETURN_IF_ERROR(ctx.ReadBatch(ops));
  return out;
}

absl::StatusOr<std::string> Read(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  uint64_t offset, len;
  if (!r.U64(&offset) || !r.U64(&len) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.read: bad arguments");
  }
  if (len > kMaxIoBytes) {
    return absl::InvalidArgumentError(absl::StrCat("dfs: reads are at most ", kMaxIoBytes, " bytes"));
  }
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t ino, ResolveFile(ctx, fs, path));
    absl::StatusOr<Inode> n = ReadInode(ctx, ino);
    if (absl::IsNotFound(n.status())) continue;  // removed under us: resolve again
    if (!n.ok()) return n.status();
    if (n->gen & 1) {  // being written
      ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
      continue;
    }
    absl::StatusOr<std::string> data = ReadData(ctx, *n, offset, len);
    ARDMA_ASSIGN_OR_RETURN(bool unchanged, Unchanged(ctx, *n));
    if (unchanged && data.ok()) return data;
  }
  return absl::AbortedError("dfs: the file kept changing under the read");
}

// The inode behind a file handle: a live file, or NOT_FOUND (removed since it was opened).
absl::StatusOr<Inode> HandleInode(Context& ctx, uint64_t ino) {
  absl::StatusOr<Inode> n = ReadInode(ctx, ino);
  if (!n.ok() || n->removed || n->type != FileType::kFile) {
    return absl::NotFoundError("dfs: the opened file was removed");
  }
  return n;
}

absl::StatusOr<std::string> Pread(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t sb, ino, offset, len;
  if (!r.U64(&sb) || !r.U64(&ino) || !r.U64(&offset) || !r.U64(&len) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.pread: bad arguments");
  }
  if (len > kMaxIoBytes) {
    return absl::InvalidArgumentError(absl::StrCat("dfs: reads are at most ", kMaxIoBytes, " bytes"));
  }
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Inode n, HandleInode(ctx, ino));
    if (n.gen & 1) {
      ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
      continue;
    }
    absl::StatusOr<std::string> data = ReadData(ctx, n, offset, len);
    ARDMA_ASSIGN_OR_RETURN(bool unchanged, Unchanged(ctx, n));
    if (unchanged && data.ok()) return data;
  }
  return absl::AbortedError("dfs: the file kept changing under the read");
}

// Writes `data` at `offset` into the locked file `n`, allocating blocks and growing the table.
// Returns the new size.
absl::StatusOr<uint64_t> WriteData(Context& ctx, const Fs& fs, const Inode& n, uint64_t offset,
                                   std::string_view data) {
  uint64_t end = offset + data.size();
  if (data.empty()) return n.size;
  uint64_t first = offset / kBlockSize, last = (end - 1) / kBlockSize;
  ARDMA_ASSIGN_OR_RETURN(auto grown, GrowTable(ctx, n.table, n.capacity, last + 1));
  auto [table, capacity] = grown;
  std::vector<uint64_t> blocks(last - first + 1);
  ARDMA_RETURN_IF_ERROR(ctx.Read(table + 8 * first, std::span<char>(reinterpret_cast<char*>(
                                                                        blocks.data()),
                                                                    8 * blocks.size())));
  std::vector<uint64_t> fresh;
  absl::Status s;
  static const std::string kZeros(kBlockSize, '\0');
  for (uint64_t b = first; b <= last && s.ok(); ++b) {
    if (blocks[b - first] != 0) continue;
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, kBlockSize);
    if (!block.ok()) {
      s = block.status();
      break;
    }
    fresh.push_back(*block);
    blocks[b - first] = *block;
    // Zero what this write does not cover, so the block reads as the hole it was.
    bool whole = offset <= b * kBlockSize && end >= (b + 1) * kBlockSize;
    if (!whole) s = ctx.Write(*block, kZeros);
  }
  if (!s.ok()) {
    for (uint64_t b : fresh) heap::Free(ctx, b).IgnoreError();
    if (table != n.table) heap::Free(ctx, table).IgnoreError();
    return s;
  }
  // Mark the file as being written (odd generation), write, publish, mark done.
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino + kInGen, n.gen + 1));
  std::vector<WriteOp> ops;
  for (uint64_t b = first; b <= last; ++b) {
    uint64_t from = std::max(offset, b * kBlockSize);
    uint64_t to = std::min(end, (b + 1) * kBlockSize);
    ops.push_back({blocks[b - first] + (from - b * kBlockSize), data.substr(from - offset, to - from)});
  }
  ops.push_back({table + 8 * first, std::string_view(reinterpret_cast<const char*>(blocks.data()),
                                                     8 * blocks.size())});
  ARDMA_RETURN_IF_ERROR(ctx.WriteBatch(ops));
  uint64_t size = std::max(n.size, end);
  uint64_t now = static_cast<uint64_t>(NowNs());
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, n.ino,
                                  {{kInTable, table},
                                   {kInCapacity, capacity},
                                   {kInSize, size},
                                   {kInMtime, now},
                                   {kInCtime, now},
                                   {kInGen, n.gen + 2}}));
  if (table != n.table && n.table != 0) ARDMA_RETURN_IF_ERROR(heap::Free(ctx, n.table));
  if (!fresh.empty()) {
    // (A handle's superblock address comes from the client: check it before counting into it.)
    ARDMA_ASSIGN_OR_RETURN(uint64_t magic, ctx.ReadU64(fs.sb));
    if (magic != kSuperMagic) return absl::DataLossError("dfs: bad superblock in handle");
    ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbBlocks, fresh.size()).status());
  }
  return size;
}

// The locked, live file at `path`.
absl::StatusOr<Inode> LockFile(Context& ctx, const Fs& fs, std::string_view path, Locks& locks) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, ResolveFile(ctx, fs, path));
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  if (n.removed) return NoSuchEntry(path);
  return n;
}

absl::StatusOr<std::string> Write(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  uint64_t offset;
  std::string_view data;
  if (!r.U64(&offset) || !r.Bytes32(&data) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.write: bad arguments");
  }
  if (data.size() > kMaxIoBytes) {
    return absl::InvalidArgumentError(absl::StrCat("dfs: writes are at most ", kMaxIoBytes, " bytes"));
  }
  if (offset > (1ull << 48)) return absl::InvalidArgumentError("dfs: offset too large");
  Locks locks(ctx);
  ARDMA_ASSIGN_OR_RETURN(Inode n, LockFile(ctx, fs, path, locks));
  ARDMA_ASSIGN_OR_RETURN(uint64_t size, WriteData(ctx, fs, n, offset, data));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  std::string out;
  ByteWriter(&out).U64(size);
  return out;
}

absl::StatusOr<std::string> Pwrite(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t sb, ino, offset;
  std::string_view data;
  if (!r.U64(&sb) || !r.U64(&ino) || !r.U64(&offset) || !r.Bytes32(&data) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.pwrite: bad arguments");
  }
  if (data.size() > kMaxIoBytes) {
    return absl::InvalidArgumentError(absl::StrCat("dfs: writes are at most ", kMaxIoBytes, " bytes"));
  }
  if (offset > (1ull << 48)) return absl::InvalidArgumentError("dfs: offset too large");
  ARDMA_RETURN_IF_ERROR(HandleInode(ctx, ino).status());
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode n, HandleInode(ctx, ino));
  Fs fs;
  fs.sb = sb;
  ARDMA_ASSIGN_OR_RETURN(uint64_t size, WriteData(ctx, fs, n, offset, data));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  std::string out;
  ByteWriter(&out).U64(size);
  return out;
}

absl::StatusOr<std::string> Truncate(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  uint64_t len;
  if (!r.U64(&len) || !r.AtEnd()) return absl::InvalidArgumentError("dfs.truncate: bad arguments");
  if (len > (1ull << 48)) return absl::InvalidArgumentError("dfs: length too large");
  Locks locks(ctx);
  ARDMA_ASSIGN_OR_RETURN(Inode n, LockFile(ctx, fs, path, locks));
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino + kInGen, n.gen + 1));
  if (len < n.size && n.table != 0) {
    // Free whole blocks past the end; zero the rest of the block the end falls in.
    uint64_t keep = (len + kBlockSize - 1) / kBlockSize;
    std::vector<uint64_t> blocks(n.capacity);
    ARDMA_RETURN_IF_ERROR(ctx.Read(n.table, std::span<char>(reinterpret_cast<char*>(blocks.data()),
                                                            8 * blocks.size())));
    uint64_t freed = 0;
    for (uint64_t b = keep; b < blocks.size(); ++b) {
      if (blocks[b] == 0) continue;
      ARDMA_RETURN_IF_ERROR(heap::Free(ctx, blocks[b]));
      blocks[b] = 0;
      ++freed;
    }
    if (len % kBlockSize != 0 && blocks[keep - 1] != 0) {
      ARDMA_RETURN_IF_ERROR(ctx.Write(blocks[keep - 1] + len % kBlockSize,
                                      std::string(kBlockSize - len % kBlockSize, '\0')));
    }
    if (keep < blocks.size()) {
      ARDMA_RETURN_IF_ERROR(
          ctx.Write(n.table + 8 * keep,
                    std::string_view(reinterpret_cast<const char*>(blocks.data() + keep),
                                     8 * (blocks.size() - keep))));
    }
    if (freed > 0) ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbBlocks, -freed).status());
  }
  uint64_t now = static_cast<uint64_t>(NowNs());
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, n.ino,
                                  {{kInSize, len}, {kInMtime, now}, {kInCtime, now},
                                   {kInGen, n.gen + 2}}));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  return std::string();
}

absl::StatusOr<std::string> Copy(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view from, ParsePath(r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view to, ParsePath(r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.copy: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(uint64_t src_ino, ResolveFile(ctx, fs, from));
  if (absl::StatusOr<uint64_t> existing = Resolve(ctx, fs, to); existing.ok()) {
    ARDMA_ASSIGN_OR_RETURN(Inode e, ReadInode(ctx, *existing));
    if (e.type == FileType::kDirectory) return IsADirectory();
  }
  // The destination: an existing file (overwritten) or a new one with the source's mode.
  ARDMA_ASSIGN_OR_RETURN(Inode src0, ReadInode(ctx, src_ino));
  std::string make_args;
  ByteWriter mw(&make_args);
  mw.Str16(fs.name);
  mw.Str16(to);
  mw.U32(src0.mode);
  mw.U8(0);
  ARDMA_RETURN_IF_ERROR(Create(ctx, make_args).status());
  ARDMA_ASSIGN_OR_RETURN(uint64_t dst_ino, ResolveFile(ctx, fs, to));
  if (dst_ino == src_ino) {
    ARDMA_ASSIGN_OR_RETURN(Inode same, ReadInode(ctx, src_ino));
    return StatResult(same);
  }
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({src_ino + kInLock, dst_ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode src, ReadInode(ctx, src_ino));
  ARDMA_ASSIGN_OR_RETURN(Inode dst, ReadInode(ctx, dst_ino));
  if (src.removed) return NoSuchEntry(from);
  if (dst.removed) return NoSuchEntry(to);
  // Build the copy's table: a new block per source block, holes stay holes.
  uint64_t nblocks = (src.size + kBlockSize - 1) / kBlockSize;
  std::vector<uint64_t> src_blocks(std::min(nblocks, src.capacity), 0);
  if (!src_blocks.empty()) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(src.table, std::span<char>(reinterpret_cast<char*>(
                                                                  src_blocks.data()),
                                                              8 * src_blocks.size())));
  }
  std::vector<uint64_t> copies(nblocks, 0);
  absl::Status s;
  uint64_t allocated = 0;
  uint64_t table = 0;
  if (nblocks > 0) {
    absl::StatusOr<uint64_t> t = heap::Allocate(ctx, 8 * nblocks);
    if (!t.ok()) return t.status();
    table = *t;
  }
  std::string buffer;
  for (uint64_t b = 0; b < src_blocks.size() && s.ok(); ++b) {
    if (src_blocks[b] == 0) continue;
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, kBlockSize);
    if (!block.ok()) {
      s = block.status();
      break;
    }
    copies[b] = *block;
    ++allocated;
    if (ctx.IsLocal()) {
      absl::StatusOr<std::string_view> view = ctx.View(src_blocks[b], kBlockSize);
      s = view.ok() ? ctx.Write(*block, *view) : view.status();
    } else {
      absl::StatusOr<std::string> bytes = ctx.Read(src_blocks[b], kBlockSize);
      s = bytes.ok() ? ctx.Write(*block, *bytes) : bytes.status();
    }
  }
  if (s.ok() && table != 0) {
    s = ctx.Write(table, std::string_view(reinterpret_cast<const char*>(copies.data()),
                                          8 * copies.size()));
  }
  if (!s.ok()) {
    for (uint64_t b : copies) {
      if (b != 0) heap::Free(ctx, b).IgnoreError();
    }
    if (table != 0) heap::Free(ctx, table).IgnoreError();
    return s;
  }
  // Swap the copy in; the destination's old data goes.
  Inode old = dst;
  uint64_t now = static_cast<uint64_t>(NowNs());
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(dst.ino + kInGen, dst.gen + 1));
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, dst.ino,
                                  {{kInTable, table},
                                   {kInCapacity, nblocks},
                                   {kInSize, src.size},
                                   {kInMtime, now},
                                   {kInCtime, now},
                                   {kInGen, dst.gen + 2}}));
  if (allocated > 0) ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbBlocks, allocated).status());
  ARDMA_RETURN_IF_ERROR(locks.Release());
  if (old.table != 0) {
    std::vector<uint64_t> blocks(old.capacity);
    ARDMA_RETURN_IF_ERROR(ctx.Read(old.table, std::span<char>(reinterpret_cast<char*>(
                                                                  blocks.data()),
                                                              8 * blocks.size())));
    uint64_t freed = 0;
    for (uint64_t b : blocks) {
      if (b == 0) continue;
      ARDMA_RETURN_IF_ERROR(heap::Free(ctx, b));
      ++freed;
    }
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, old.table));
    if (freed > 0) ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbBlocks, -freed).status());
  }
  ARDMA_ASSIGN_OR_RETURN(Inode done, ReadInode(ctx, dst.ino));
  return StatResult(done);
}

// find: a depth-first walk in pre-order. The cursor is the walk's stack: per level the directory,
// the next child index and that directory's path.
struct Frame {
  uint64_t ino = 0, next = 0;
  std::string path;
};

std::string JoinPath(std::string_view dir, std::string_view name) {
  return dir == "/" ? absl::StrCat("/", ToAbsl(name)) : absl::StrCat(ToAbsl(dir), "/", ToAbsl(name));
}

absl::StatusOr<std::string> Find(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  std::string_view cursor;
  uint32_t max, max_depth = UINT32_MAX;
  if (!r.Bytes32(&cursor) || !r.U32(&max) || (!r.AtEnd() && !r.U32(&max_depth)) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.find: bad arguments");
  }
  max = std::clamp<uint32_t>(max, 1, kMaxPage);
  std::vector<Frame> stack;
  std::vector<FoundEntry> found;
  auto entry = [](std::string path, const Inode& n, uint32_t depth) {
    return FoundEntry{std::move(path), n.type, n.size, depth, n.mode, absl::FromUnixNanos(n.mtime)};
  };
  if (cursor.empty()) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
    std::string start = path.size() > 1 && path.back() == '/' ? std::string(path.substr(0, path.size() - 1))
                                                             : std::string(path);
    found.push_back(entry(start, n, 0));
    if (n.type == FileType::kDirectory && max_depth > 0) stack.push_back({ino, 0, start});
  } else {
    ByteReader c(cursor);
    uint32_t depth;
    if (!c.U32(&depth)) return absl::InvalidArgumentError("dfs.find: bad cursor");
    for (uint32_t i = 0; i < depth; ++i) {
      Frame f;
      std::string_view p;
      if (!c.U64(&f.ino) || !c.U64(&f.next) || !c.Str16(&p)) {
        return absl::InvalidArgumentError("dfs.find: bad cursor");
      }
      f.path = std::string(p);
      stack.push_back(std::move(f));
    }
  }
  while (!stack.empty() && found.size() < max) {
    Frame& top = stack.back();
    absl::StatusOr<Inode> dir = ReadInode(ctx, top.ino);
    if (!dir.ok() || top.next >= dir->size) {  // done (or removed meanwhile)
      stack.pop_back();
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(uint64_t child, ctx.ReadU64(dir->table + 8 * top.next));
    ++top.next;
    absl::StatusOr<Inode> n = ReadInode(ctx, child);
    if (!n.ok()) continue;  // removed meanwhile
    std::string child_path = JoinPath(top.path, n->name);
    uint32_t depth = static_cast<uint32_t>(stack.size());
    found.push_back(entry(child_path, *n, depth));
    if (n->type == FileType::kDirectory && depth < max_depth) {
      stack.push_back({child, 0, child_path});
    }
  }
  FindPage page;
  if (!stack.empty()) {
    ByteWriter nw(&page.next);
    nw.U32(static_cast<uint32_t>(stack.size()));
    for (const Frame& f : stack) {
      nw.U64(f.ino);
      nw.U64(f.next);
      nw.Str16(f.path);
    }
  }
  page.done = stack.empty();
  page.entries = std::move(found);
  return EncodeFindPage(page);
}

absl::StatusOr<std::string> SetAttr(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view path, ParsePath(r));
  uint32_t mode;
  uint64_t mtime;
  if (!r.U32(&mode) || !r.U64(&mtime) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.setattr: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  uint64_t now = static_cast<uint64_t>(NowNs());
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, ino,
                                  {{kInMode, mode & 07777},
                                   {kInMtime, mtime != 0 ? mtime : static_cast<uint64_t>(n.mtime)},
                                   {kInCtime, now},
                                   {kInGen, n.gen + 2}}));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  return std::string();
}

// Copies the tree `from` into `to` (created or merged into) in one request, walking it with Find.
absl::StatusOr<std::string> CopyTree(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view from, ParsePath(r));
  ARDMA_ASSIGN_OR_RETURN(std::string_view to, ParsePath(r));
  uint8_t no_clobber, preserve;
  if (!r.U8(&no_clobber) || !r.U8(&preserve) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.copytree: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t src, Resolve(ctx, fs, from));
  ARDMA_ASSIGN_OR_RETURN(Inode root, ReadInode(ctx, src));
  if (root.type != FileType::kDirectory) return NotADirectory();
  ARDMA_ASSIGN_OR_RETURN(Place place, ResolvePlace(ctx, fs, to));
  for (uint64_t a = place.parent;;) {  // not into itself
    if (a == src) return absl::InvalidArgumentError("dfs: cannot copy a directory into itself");
    if (a == fs.root) break;
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, a));
    a = n.parent;
  }
  auto path_args = [&](std::string_view p) {
    std::string out;
    ByteWriter w(&out);
    w.Str16(fs.name);
    w.Str16(p);
    return out;
  };
  std::string base = std::string(to);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  uint64_t files = 0, dirs = 0;
  std::vector<std::tuple<std::string, uint32_t, int64_t>> dir_attrs;  // set after their contents
  std::string cursor;
  size_t strip = 0;
  for (bool first = true;; first = false) {
    std::string find_args = path_args(from);
    ByteWriter fw(&find_args);
    fw.Bytes32(cursor);
    fw.U32(kMaxPage);
    ARDMA_ASSIGN_OR_RETURN(std::string bytes, Find(ctx, find_args));
    ARDMA_ASSIGN_OR_RETURN(FindPage page, DecodeFindPage(bytes));
    for (size_t i = 0; i < page.entries.size(); ++i) {
      const FoundEntry& entry = page.entries[i];
      std::string_view p = entry.path;
      uint32_t mode = entry.mode;
      uint64_t mtime = static_cast<uint64_t>(absl::ToUnixNanos(entry.mtime));
      if (first && i == 0) strip = p.size();  // the walk's own name for `from`
      std::string dst = base + std::string(p.substr(std::min(strip, p.size())));
      if (dst.empty()) dst = "/";
      if (entry.type == FileType::kDirectory) {
        std::string mk = path_args(dst);
        ByteWriter(&mk).U32(mode);
        absl::StatusOr<std::string> made = Mkdir(ctx, mk);
        if (!made.ok() && !absl::IsAlreadyExists(made.status())) return made.status();
        if (!made.ok()) {
          ARDMA_ASSIGN_OR_RETURN(uint64_t existing, Resolve(ctx, fs, dst));
          ARDMA_ASSIGN_OR_RETURN(Inode e, ReadInode(ctx, existing));
          if (e.type != FileType::kDirectory) {
            return absl::FailedPreconditionError(
                absl::StrCat("dfs: cannot overwrite non-directory ", dst, " with a directory"));
          }
        }
        ++dirs;
        if (preserve) dir_attrs.emplace_back(dst, mode, static_cast<int64_t>(mtime));
        continue;
      }
      if (no_clobber && Resolve(ctx, fs, dst).ok()) continue;
      std::string cp = path_args(p);
      ByteWriter(&cp).Str16(dst);
      ARDMA_RETURN_IF_ERROR(Copy(ctx, cp).status());
      ++files;
      if (preserve) {
        std::string attr = path_args(dst);
        ByteWriter aw(&attr);
        aw.U32(mode);
        aw.U64(mtime);
        ARDMA_RETURN_IF_ERROR(SetAttr(ctx, attr).status());
      }
    }
    if (page.done) break;
    cursor = page.next;
  }
  for (auto it = dir_attrs.rbegin(); it != dir_attrs.rend(); ++it) {
    std::string attr = path_args(std::get<0>(*it));
    ByteWriter aw(&attr);
    aw.U32(std::get<1>(*it));
    aw.U64(static_cast<uint64_t>(std::get<2>(*it)));
    ARDMA_RETURN_IF_ERROR(SetAttr(ctx, attr).status());
  }
  std::string out;
  ByteWriter w(&out);
  w.U64(files);
  w.U64(dirs);
  return out;
}

absl::StatusOr<std::string> UsageFn(Context& ctx, std::string_view args) {
  ByteReader r(args);
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, r));
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.usage: trailing bytes");
  char b[kSuperBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(fs.sb, std::span<char>(b, sizeof(b))));
  ARDMA_ASSIGN_OR_RETURN(uint64_t allocated, ctx.ReadU64(heap::kAllocatedBytesOffset));
  std::string out;
  ByteWriter w(&out);
  w.U64(Field(b, kSbFiles));
  w.U64(Field(b, kSbDirs));
  w.U64(Field(b, kSbBlocks));
  w.U64(allocated);
  return out;
}

}  // namespace
}  // namespace ardma::dfs

ARDMA_ACTIVE_LIBRARY(dfs, {"dfs.mkdir", &ardma::dfs::Mkdir}, {"dfs.create", &ardma::dfs::Create},
                     {"dfs.stat", &ardma::dfs::StatFn}, {"dfs.readdir", &ardma::dfs::Readdir},
                     {"dfs.unlink", &ardma::dfs::Unlink}, {"dfs.rmdir", &ardma::dfs::Rmdir},
                     {"dfs.rename", &ardma::dfs::Rename}, {"dfs.read", &ardma::dfs::Read},
                     {"dfs.write", &ardma::dfs::Write}, {"dfs.truncate", &ardma::dfs::Truncate},
                     {"dfs.copy", &ardma::dfs::Copy}, {"dfs.find", &ardma::dfs::Find},
                     {"dfs.usage", &ardma::dfs::UsageFn}, {"dfs.open", &ardma::dfs::Open},
                     {"dfs.pread", &ardma::dfs::Pread}, {"dfs.pwrite", &ardma::dfs::Pwrite},
                     {"dfs.setattr", &ardma::dfs::SetAttr}, {"dfs.copytree", &ardma::dfs::CopyTree});
