#include "services/dfs/dfs_inode.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/slots.h"
#include "services/dht/dht_format.h"
#include "services/lock_word.h"
#include "services/random64.h"
#include "services/slot_check.h"

namespace ardma::dfs {
namespace {

std::string U64Bytes(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

std::string EntryKey(uint64_t parent, std::string_view name) {
  return absl::StrCat(ToAbsl(U64Bytes(parent)), ToAbsl(name));
}

std::string TableArgs(const Fs& fs) {
  std::string out;
  dht::EncodeTarget(dht::Target{.name = fs.table, .unfenced = true}, &out);
  return out;
}

std::string EntryValue(const Entry& e) {
  return U64Bytes(e.ino) + std::string(1, static_cast<char>(e.type));
}

// The inode `parts` leads to from the root, resolved as the kernel resolves a path: "." stays,
// ".." goes to the parent (the root's parent is the root), a symbolic link before the last
// component is replaced by its target (relative to the link's directory, or from the root), the
// last one only if `follow_last`; every component before the last must lead to a directory.
absl::StatusOr<uint64_t> Walk(Context& ctx, const Fs& fs, std::span<const std::string_view> parts,
                              std::string_view path, bool follow_last) {
  uint64_t cur = fs.root;
  bool cur_is_dir = true;
  size_t next = 0;                // the next of `parts`, until a link is met
  std::vector<std::string> todo;  // after a link: the components still to walk, last first
  bool linked = false;
  int links = 0;
  for (;;) {
    std::string held;
    std::string_view part;
    if (linked) {
      if (todo.empty()) break;
      held = std::move(todo.back());
      todo.pop_back();
      part = held;
    } else {
      if (next == parts.size()) break;
      part = parts[next++];
    }
    bool last = linked ? todo.empty() : next == parts.size();
    if (!cur_is_dir) return NotADirectory();
    if (part == ".") continue;
    if (part == "..") {
      ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, cur));
      cur = n.parent;
      continue;
    }
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, LookupEntry(ctx, fs, cur, part));
    if (!e) return NoSuchEntry(path);
    if (e->type != FileType::kSymlink || (last && !follow_last)) {
      cur = e->ino;
      cur_is_dir = e->type == FileType::kDirectory;
      continue;
    }
    if (++links > kMaxLinks) {
      return absl::FailedPreconditionError(
          absl::StrCat("dfs: too many levels of symbolic links: ", ToAbsl(path)));
    }
    ARDMA_ASSIGN_OR_RETURN(Inode link, ReadInode(ctx, e->ino));
    ARDMA_ASSIGN_OR_RETURN(std::string target, LinkTarget(ctx, link));
    if (!linked) {
      linked = true;
      for (size_t i = parts.size(); i > next; --i) todo.emplace_back(parts[i - 1]);
    }
    if (!target.empty() && target[0] == '/') cur = fs.root;  // else from the link's directory
    const std::string absolute = "/" + target;  // SplitPath wants an absolute path
    ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> more, SplitPath(absolute));
    for (auto it = more.rbegin(); it != more.rend(); ++it) todo.emplace_back(*it);
  }
  return cur;
}

}  // namespace

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

// ---- File systems and inodes ----

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
  if (!ValidFileType(type)) return absl::DataLossError("dfs: bad inode type");
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
  n.remote = Field(b, kInRemote) != 0;
  n.data_gen = Field(b, kInDataGen);
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

absl::Status FreeBlocks(Context& ctx, const Fs& fs, std::span<const uint64_t> blocks) {
  uint64_t freed = 0;
  for (uint64_t b : blocks) {
    if (b == 0) continue;
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, b));
    ++freed;
  }
  if (freed > 0) ARDMA_RETURN_IF_ERROR(ctx.FetchAdd(fs.sb + kSbBlocks, -freed).status());
  return absl::OkStatus();
}

absl::Status FreeInode(Context& ctx, const Fs& fs, const Inode& n) {
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino, 0));  // readers holding the number see it gone
  if (n.table != 0) {
    if (n.type != FileType::kDirectory) {
      ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> blocks, ReadTable(ctx, n.table, n.capacity));
      ARDMA_RETURN_IF_ERROR(FreeBlocks(ctx, fs, blocks));
    }
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, n.table));
  }
  ARDMA_RETURN_IF_ERROR(
      ctx.FetchAdd(fs.sb + (n.type == FileType::kDirectory ? kSbDirs : kSbFiles), ~0ull).status());
  return heap::Free(ctx, n.ino);
}

absl::StatusOr<bool> Unchanged(Context& ctx, uint64_t ino, uint64_t gen) {
  char b[kInGen + 8];
  ARDMA_RETURN_IF_ERROR(ctx.Read(ino, std::span<char>(b, sizeof(b))));
  return Field(b, 0) == kInodeMagic && Field(b, kInGen) == gen;
}

absl::StatusOr<std::vector<uint64_t>> ReadTable(Context& ctx, uint64_t table, uint64_t count) {
  // `count` comes from a heap word any writer can change: check the table lies in the heap before
  // sizing anything from it (on the server, a view checks the range without copying).
  if (count > (1ull << 40)) return absl::DataLossError("dfs: bad table size");
  if (ctx.IsLocal() && count > 0) ARDMA_RETURN_IF_ERROR(ctx.View(table, 8 * count).status());
  std::vector<uint64_t> entries(count, 0);
  if (count > 0) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(
        table, std::span<char>(reinterpret_cast<char*>(entries.data()), 8 * entries.size())));
  }
  return entries;
}

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

absl::StatusOr<Fs> OpenFs(Context& ctx, std::string_view name) {
  ARDMA_RETURN_IF_ERROR(CheckFsName(name));
  Fs fs;
  ARDMA_ASSIGN_OR_RETURN(std::optional<uint64_t> fence, heap::FindRoot(ctx, slots::kFenceRoot));
  fs.spread = fence.has_value();
  if (fs.spread) {
    ARDMA_RETURN_IF_ERROR(CheckSlotServedAt(ctx, *fence, NamespaceSlot(name), /*write=*/true));
  }
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

// (The reply is decoded for its status: a table that is not where its root says answers in the
// reply, as stale, not in the call's status.)
absl::Status PutEntry(Context& ctx, const Fs& fs, uint64_t parent, std::string_view name,
                      const Entry& e) {
  absl::StatusOr<std::string> put = ctx.Call(
      "dht.put", TableArgs(fs) + dht::EncodePutArgs(EntryKey(parent, name), EntryValue(e)));
  if (!put.ok()) return put.status();
  return dht::DecodeReply(*put, dht::ReplyKind::kFlag).status();
}

absl::Status RemoveEntry(Context& ctx, const Fs& fs, uint64_t parent, std::string_view name) {
  absl::StatusOr<std::string> removed =
      ctx.Call("dht.remove", TableArgs(fs) + dht::EncodeKeyArgs(EntryKey(parent, name)));
  if (!removed.ok()) return removed.status();
  return dht::DecodeReply(*removed, dht::ReplyKind::kFlag).status();
}

// ---- Inode locks ----

absl::Status Locks::Take(std::vector<uint64_t> addrs) {
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  for (uint64_t a : addrs) {
    absl::StatusOr<uint64_t> nonce = AcquireLockWord(ctx_, a, "dfs");
    if (!nonce.ok()) {
      Release().IgnoreError();
      return nonce.status();
    }
    held_.push_back({a, *nonce});
  }
  return absl::OkStatus();
}

absl::Status Locks::Release() {
  absl::Status status;
  for (auto [addr, nonce] : held_) status.Update(ReleaseLockWord(ctx_, addr, nonce, "dfs"));
  held_.clear();
  return status;
}

// ---- Paths ----

absl::Status NotADirectory() { return absl::FailedPreconditionError("dfs: not a directory"); }
absl::Status IsADirectory() { return absl::FailedPreconditionError("dfs: is a directory"); }
absl::Status NoSuchEntry(std::string_view path) {
  return absl::NotFoundError(absl::StrCat("dfs: no such file or directory: ", ToAbsl(path)));
}

absl::StatusOr<uint64_t> Resolve(Context& ctx, const Fs& fs, std::string_view path,
                                 bool follow_last) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  // A trailing slash means "the directory", as the kernel reads it: "link/" follows the link,
  // "file/" is not a directory. ("x/" walks as "x/.".)
  if (path.size() > 1 && path.back() == '/') parts.push_back(".");
  return Walk(ctx, fs, parts, path, follow_last);
}

absl::StatusOr<uint64_t> ResolveFile(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path, /*follow_last=*/true));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  if (n.type == FileType::kDirectory) return IsADirectory();
  return ino;
}

absl::StatusOr<Place> ResolvePlace(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  if (parts.empty()) return absl::InvalidArgumentError("dfs: the root has no name to change");
  std::string_view name = parts.back();
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError("dfs: the path must end in a name, not . or ..");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t parent,
                         Walk(ctx, fs, std::span(parts).first(parts.size() - 1), path, true));
  ARDMA_ASSIGN_OR_RETURN(Inode p, ReadInode(ctx, parent));
  if (p.type != FileType::kDirectory) return NotADirectory();
  return Place{parent, name};
}

absl::Status CheckNotBelow(Context& ctx, const Fs& fs, uint64_t dir, uint64_t ino,
                           std::string_view message) {
  for (uint64_t a = dir;;) {
    if (a == ino) return absl::InvalidArgumentError(ToAbsl(message));
    if (a == fs.root) return absl::OkStatus();
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, a));
    a = n.parent;
  }
}

// ---- Child arrays and block tables ----

absl::StatusOr<std::pair<uint64_t, uint64_t>> GrowTable(Context& ctx, uint64_t table,
                                                        uint64_t capacity, uint64_t need) {
  if (need <= capacity) return std::make_pair(table, capacity);
  // At least double, and as many entries as fill the heap block.
  uint64_t cap = std::max<uint64_t>({need, 2 * capacity, 2});
  cap = heap::CapacityFor(8 * cap) / 8;
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

// ---- Data ----

// Reads [offset, offset + len) of file inode `n` (clipped to its size) into a string.
absl::StatusOr<std::string> ReadData(Context& ctx, const Inode& n, uint64_t offset, uint64_t len) {
  if (offset >= n.size) return std::string();
  len = std::min(len, n.size - offset);
  std::string out(len, '\0');
  if (len == 0) return out;
  uint64_t first = offset / kBlockSize, last = (offset + len - 1) / kBlockSize;
  uint64_t in_table = n.table == 0 ? 0 : std::min(last + 1, n.capacity);
  ARDMA_ASSIGN_OR_RETURN(
      std::vector<uint64_t> blocks,
      ReadTable(ctx, n.table + 8 * first, in_table > first ? in_table - first : 0));
  blocks.resize(last - first + 1, 0);
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

absl::StatusOr<std::string> LinkTarget(Context& ctx, const Inode& link) {
  // A link's target never changes after it appears, so one read is consistent.
  return ReadData(ctx, link, 0, link.size);
}

}  // namespace ardma::dfs
