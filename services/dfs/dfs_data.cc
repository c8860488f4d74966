// The file system's operations on file data: read, write (by path or handle), truncate, copy,
// usage. Writers lock the inode and mark it odd while they write; readers retry until they read
// a generation that did not move (a seqlock).
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "services/dfs/dfs.h"
#include "services/dfs/dfs_content.h"

namespace ardma::dfs {
namespace {

absl::Status CheckReadLength(uint64_t len) {
  if (len > kMaxIoBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dfs: reads are at most ", kMaxIoBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckWrite(uint64_t offset, std::string_view data) {
  if (data.size() > kMaxIoBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dfs: writes are at most ", kMaxIoBytes, " bytes"));
  }
  if (offset > (1ull << 48)) return absl::InvalidArgumentError("dfs: offset too large");
  return absl::OkStatus();
}

// A handle's operation on a file whose bytes are on another member needs the file system's name.
absl::Status CheckContentName(std::string_view fs_name) {
  if (!fs_name.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "dfs: the file's bytes are on another member of the cluster: name the file system (the "
      "handle call's last argument)");
}

// Reads a consistent copy of [offset, offset + len) of the file `inode()` gives: retried while a
// writer is at it (odd generation) or the generation moved during the read.
// A file whose bytes are on another member (of file system `fs_name`) is read there.
template <typename InodeFn>
absl::StatusOr<std::string> ReadConsistent(Context& ctx, std::string_view fs_name, uint64_t offset,
                                           uint64_t len, InodeFn inode) {
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    absl::StatusOr<std::optional<Inode>> n = inode();
    if (!n.ok()) return n.status();
    if (!n->has_value()) continue;  // removed under us: resolve again
    if ((*n)->remote) {
      ARDMA_RETURN_IF_ERROR(CheckContentName(fs_name));
      return ReadContent(ctx, fs_name, (*n)->ino, offset, len);
    }
    if ((*n)->gen & 1) {            // being written
      ARDMA_RETURN_IF_ERROR(ctx.Backoff(attempt));
      continue;
    }
    absl::StatusOr<std::string> data = ReadData(ctx, **n, offset, len);
    ARDMA_ASSIGN_OR_RETURN(bool unchanged, Unchanged(ctx, (*n)->ino, (*n)->gen));
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

// The bytes of a file of `size` that fall in block `b`.
uint64_t UsedInBlock(uint64_t size, uint64_t b) {
  return size <= b * kBlockSize ? 0 : std::min(kBlockSize, size - b * kBlockSize);
}

// A block that can hold `need` bytes in place of `old` (0: none), which holds `used` bytes and has
// room for `have`: at least double `have`, a whole block if that is most of one. Its bytes past
// `used` are zero; the caller writes over the rest. `fresh` collects it for the caller to free
// should the operation fail.
absl::StatusOr<uint64_t> GrowBlock(Context& ctx, uint64_t old, uint64_t used, uint64_t have,
                                   uint64_t need, bool overwritten_whole,
                                   std::vector<uint64_t>* fresh) {
  uint64_t want = std::min(kBlockSize, std::max(need, 2 * have));
  if (want > kBlockSize / 2) want = kBlockSize;
  ARDMA_ASSIGN_OR_RETURN(uint64_t block, heap::Allocate(ctx, want));
  fresh->push_back(block);
  if (overwritten_whole && heap::CapacityFor(want) == need) return block;
  std::string image(heap::CapacityFor(want), '\0');
  if (old != 0 && used > 0) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(old, std::span<char>(image.data(), used)));
  }
  ARDMA_RETURN_IF_ERROR(ctx.Write(block, image));
  return block;
}

// Makes block `b` (entry `b` of `table`), which holds `used` bytes of the file, hold `need`: a
// compact block too small for them moves to a bigger one (its bytes copied, the rest zero) and
// the table names it. Returns the block it replaced (0: none), for the caller to free.
absl::StatusOr<uint64_t> WidenBlock(Context& ctx, uint64_t table, uint64_t b, uint64_t used,
                                    uint64_t need, std::vector<uint64_t>* fresh) {
  if (need <= used) return 0;
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, ctx.ReadU64(table + 8 * b));
  if (old == 0) return 0;  // a hole reads as zeros at any length
  ARDMA_ASSIGN_OR_RETURN(uint64_t have, heap::BlockCapacity(ctx, old));
  if (need <= have) return 0;
  ARDMA_ASSIGN_OR_RETURN(uint64_t block, GrowBlock(ctx, old, used, have, need, false, fresh));
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(table + 8 * b, block));
  return old;
}

// Writes `data` at `offset` into the locked file `n`, allocating or growing blocks and growing the
// table. Returns the new size.
absl::StatusOr<uint64_t> WriteData(Context& ctx, const Fs& fs, const Inode& n, uint64_t offset,
                                   std::string_view data) {
  uint64_t end = offset + data.size();
  if (data.empty()) return n.size;
  uint64_t first = offset / kBlockSize, last = (end - 1) / kBlockSize;
  ARDMA_ASSIGN_OR_RETURN(auto grown, GrowTable(ctx, n.table, n.capacity, last + 1));
  auto [table, capacity] = grown;
  ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> blocks,
                         ReadTable(ctx, table + 8 * first, last - first + 1));
  std::vector<uint64_t> fresh, replaced;
  absl::Status s;
  for (uint64_t b = first; b <= last && s.ok(); ++b) {
    uint64_t used = UsedInBlock(n.size, b);
    uint64_t need = std::max(used, UsedInBlock(end, b));
    uint64_t old = blocks[b - first];
    uint64_t have = used;  // a block always holds the file's bytes in it
    if (old != 0 && need > have) {
      absl::StatusOr<uint64_t> cap = heap::BlockCapacity(ctx, old);
      if (!cap.ok()) {
        s = cap.status();
        break;
      }
      have = *cap;
    }
    if (old != 0 && need <= have) continue;
    bool whole = offset <= b * kBlockSize && end >= b * kBlockSize + need;
    absl::StatusOr<uint64_t> block = GrowBlock(ctx, old, used, have, need, whole, &fresh);
    if (!block.ok()) {
      s = block.status();
      break;
    }
    blocks[b - first] = *block;
    if (old != 0) replaced.push_back(old);
  }
  if (!s.ok()) {
    for (uint64_t b : fresh) heap::Free(ctx, b).IgnoreError();
    if (table != n.table) heap::Free(ctx, table).IgnoreError();
    return s;
  }
  // Mark the file as being written (odd generation), write, publish, mark done.
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino + kInGen, n.gen + 1));
  if (end > n.size && n.size > 0 && (n.size - 1) / kBlockSize < first) {
    // The block the old end falls in now holds file bytes to its end (zeros): a compact one
    // must grow, or reads would run past it.
    uint64_t b = (n.size - 1) / kBlockSize;
    absl::StatusOr<uint64_t> widened =
        WidenBlock(ctx, table, b, UsedInBlock(n.size, b), UsedInBlock(end, b), &fresh);
    if (!widened.ok()) {
      for (uint64_t f : fresh) heap::Free(ctx, f).IgnoreError();
      if (table != n.table) heap::Free(ctx, table).IgnoreError();
      ctx.WriteU64(n.ino + kInGen, n.gen + 2).IgnoreError();
      return widened.status();
    }
    if (*widened != 0) replaced.push_back(*widened);
  }
  std::vector<WriteOp> ops;
  for (uint64_t b = first; b <= last; ++b) {
    uint64_t from = std::max(offset, b * kBlockSize);
    uint64_t to = std::min(end, (b + 1) * kBlockSize);
    ops.push_back(
        {blocks[b - first] + (from - b * kBlockSize), data.substr(from - offset, to - from)});
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
  for (uint64_t b : replaced) ARDMA_RETURN_IF_ERROR(heap::Free(ctx, b));
  if (fresh.size() > replaced.size()) {
    // (A handle's superblock address comes from the client: check it before counting into it.)
    ARDMA_ASSIGN_OR_RETURN(uint64_t magic, ctx.ReadU64(fs.sb));
    if (magic != kSuperMagic) return absl::DataLossError("dfs: bad superblock in handle");
    ARDMA_RETURN_IF_ERROR(
        ctx.FetchAdd(fs.sb + kSbBlocks, fresh.size() - replaced.size()).status());
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

}  // namespace

absl::StatusOr<std::string> Read(Context& ctx, const Fs& fs, std::string_view path, uint64_t offset,
                                 uint64_t len) {
  ARDMA_RETURN_IF_ERROR(CheckReadLength(len));
  return ReadConsistent(ctx, fs.name, offset, len, [&]() -> absl::StatusOr<std::optional<Inode>> {
    ARDMA_ASSIGN_OR_RETURN(uint64_t ino, ResolveFile(ctx, fs, path));
    absl::StatusOr<Inode> n = ReadInode(ctx, ino);
    if (absl::IsNotFound(n.status())) return std::nullopt;
    if (!n.ok()) return n.status();
    return *std::move(n);
  });
}

absl::StatusOr<std::string> Pread(Context& ctx, uint64_t ino, uint64_t offset, uint64_t len,
                                  std::string_view fs_name) {
  ARDMA_RETURN_IF_ERROR(CheckReadLength(len));
  return ReadConsistent(ctx, fs_name, offset, len, [&]() -> absl::StatusOr<std::optional<Inode>> {
    ARDMA_ASSIGN_OR_RETURN(Inode n, HandleInode(ctx, ino));
    return n;
  });
}

absl::StatusOr<uint64_t> Write(Context& ctx, const Fs& fs, std::string_view path, uint64_t offset,
                               std::string_view data) {
  ARDMA_RETURN_IF_ERROR(CheckWrite(offset, data));
  if (fs.spread) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t ino, ResolveFile(ctx, fs, path));
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
    if (n.remote) return WriteContent(ctx, fs.name, ino, offset, data);
  }
  Locks locks(ctx);
  ARDMA_ASSIGN_OR_RETURN(Inode n, LockFile(ctx, fs, path, locks));
  ARDMA_ASSIGN_OR_RETURN(uint64_t size, WriteData(ctx, fs, n, offset, data));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  return size;
}

absl::StatusOr<uint64_t> Pwrite(Context& ctx, uint64_t sb, uint64_t ino, uint64_t offset,
                                std::string_view data, std::string_view fs_name) {
  ARDMA_RETURN_IF_ERROR(CheckWrite(offset, data));
  ARDMA_ASSIGN_OR_RETURN(Inode first, HandleInode(ctx, ino));
  if (first.remote) {
    ARDMA_RETURN_IF_ERROR(CheckContentName(fs_name));
    return WriteContent(ctx, fs_name, ino, offset, data);
  }
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode n, HandleInode(ctx, ino));
  Fs fs;
  fs.sb = sb;
  ARDMA_ASSIGN_OR_RETURN(uint64_t size, WriteData(ctx, fs, n, offset, data));
  ARDMA_RETURN_IF_ERROR(locks.Release());
  return size;
}

namespace {

// Truncates the locked, live file `n`.
absl::Status TruncateLocked(Context& ctx, const Fs& fs, const Inode& n, uint64_t len) {
  ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino + kInGen, n.gen + 1));
  std::vector<uint64_t> fresh;
  if (len > n.size && n.size > 0 && n.table != 0) {
    // Growing: the block the old end falls in must hold the new bytes in it (zeros).
    uint64_t b = (n.size - 1) / kBlockSize;
    absl::StatusOr<uint64_t> widened =
        WidenBlock(ctx, n.table, b, UsedInBlock(n.size, b), UsedInBlock(len, b), &fresh);
    if (!widened.ok()) {
      for (uint64_t f : fresh) heap::Free(ctx, f).IgnoreError();
      ARDMA_RETURN_IF_ERROR(ctx.WriteU64(n.ino + kInGen, n.gen + 2));
      return widened.status();
    }
    if (*widened != 0) ARDMA_RETURN_IF_ERROR(heap::Free(ctx, *widened));
  }
  if (len < n.size && n.table != 0) {
    // Free whole blocks past the end; zero the rest of the block the end falls in.
    uint64_t keep = (len + kBlockSize - 1) / kBlockSize;
    ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> blocks, ReadTable(ctx, n.table, n.capacity));
    if (keep < blocks.size()) {
      ARDMA_RETURN_IF_ERROR(FreeBlocks(ctx, fs, std::span(blocks).subspan(keep)));
      std::fill(blocks.begin() + keep, blocks.end(), 0);
    }
    if (len % kBlockSize != 0 && blocks[keep - 1] != 0) {
      // Zero the rest of what the block holds, so growing the file again reads zeros there.
      uint64_t tail = len % kBlockSize, held = UsedInBlock(n.size, keep - 1);
      if (held > tail) {
        ARDMA_RETURN_IF_ERROR(
            ctx.Write(blocks[keep - 1] + tail, std::string(held - tail, '\0')));
      }
    }
    if (keep < blocks.size()) {
      ARDMA_RETURN_IF_ERROR(ctx.Write(
          n.table + 8 * keep, std::string_view(reinterpret_cast<const char*>(blocks.data() + keep),
                                               8 * (blocks.size() - keep))));
    }
  }
  uint64_t now = static_cast<uint64_t>(NowNs());
  return SetFields(ctx, n.ino,
                   {{kInSize, len}, {kInMtime, now}, {kInCtime, now}, {kInGen, n.gen + 2}});
}

absl::Status CheckLength(uint64_t len) {
  if (len > (1ull << 48)) return absl::InvalidArgumentError("dfs: length too large");
  return absl::OkStatus();
}

}  // namespace

absl::Status Truncate(Context& ctx, const Fs& fs, std::string_view path, uint64_t len) {
  ARDMA_RETURN_IF_ERROR(CheckLength(len));
  Locks locks(ctx);
  ARDMA_ASSIGN_OR_RETURN(Inode n, LockFile(ctx, fs, path, locks));
  if (n.remote) {
    ARDMA_RETURN_IF_ERROR(locks.Release());
    return TruncateContent(ctx, fs.name, n.ino, len);
  }
  ARDMA_RETURN_IF_ERROR(TruncateLocked(ctx, fs, n, len));
  return locks.Release();
}

absl::Status TruncateInode(Context& ctx, const Fs& fs, uint64_t ino, uint64_t len) {
  ARDMA_RETURN_IF_ERROR(CheckLength(len));
  ARDMA_RETURN_IF_ERROR(HandleInode(ctx, ino).status());
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode n, HandleInode(ctx, ino));
  ARDMA_RETURN_IF_ERROR(TruncateLocked(ctx, fs, n, len));
  return locks.Release();
}

absl::Status FillNewInode(Context& ctx, const Fs& fs, uint64_t ino, std::string_view data) {
  if (data.empty()) return absl::OkStatus();
  ARDMA_RETURN_IF_ERROR(CheckWrite(0, data));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  return WriteData(ctx, fs, n, 0, data).status();
}

absl::StatusOr<std::string> Readlink(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  if (n.type != FileType::kSymlink) {
    return absl::InvalidArgumentError(
        absl::StrCat("dfs: not a symbolic link: ", ToAbsl(path)));
  }
  return LinkTarget(ctx, n);
}

absl::StatusOr<Stat> Copy(Context& ctx, const Fs& fs, std::string_view from, std::string_view to) {
  ARDMA_RETURN_IF_ERROR(PrepareForPeers(ctx, fs));
  ARDMA_ASSIGN_OR_RETURN(uint64_t src_ino, ResolveFile(ctx, fs, from));
  if (absl::StatusOr<uint64_t> existing = Resolve(ctx, fs, to); existing.ok()) {
    ARDMA_ASSIGN_OR_RETURN(Inode e, ReadInode(ctx, *existing));
    if (e.type == FileType::kDirectory) return IsADirectory();
  }
  // The destination: an existing file (overwritten) or a new one with the source's mode.
  ARDMA_ASSIGN_OR_RETURN(Inode src0, ReadInode(ctx, src_ino));
  ARDMA_RETURN_IF_ERROR(
      Make(ctx, fs, to, FileType::kFile, src0.mode, /*exclusive=*/false).status());
  ARDMA_ASSIGN_OR_RETURN(uint64_t dst_ino, ResolveFile(ctx, fs, to));
  if (dst_ino == src_ino) {
    ARDMA_ASSIGN_OR_RETURN(Inode same, ReadInode(ctx, src_ino));
    return same.ToStat();
  }
  if (fs.spread) {
    ARDMA_ASSIGN_OR_RETURN(Inode src, ReadInode(ctx, src_ino));
    ARDMA_ASSIGN_OR_RETURN(Inode dst, ReadInode(ctx, dst_ino));
    if (src.remote != dst.remote) {
      return absl::FailedPreconditionError(
          "dfs: cannot copy between a file made before this server joined its cluster and one "
          "made after");
    }
    if (src.remote) {  // member to member: the bytes pass neither the client nor this server
      ARDMA_RETURN_IF_ERROR(CopyContent(ctx, fs.name, src_ino, dst_ino));
      ARDMA_ASSIGN_OR_RETURN(Inode done, ReadInode(ctx, dst_ino));
      return done.ToStat();
    }
  }
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({src_ino + kInLock, dst_ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode src, ReadInode(ctx, src_ino));
  ARDMA_ASSIGN_OR_RETURN(Inode dst, ReadInode(ctx, dst_ino));
  if (src.removed) return NoSuchEntry(from);
  if (dst.removed) return NoSuchEntry(to);
  // Build the copy's table: a new block per source block, holes stay holes.
  uint64_t nblocks = (src.size + kBlockSize - 1) / kBlockSize;
  ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> src_blocks,
                         ReadTable(ctx, src.table, std::min(nblocks, src.capacity)));
  std::vector<uint64_t> copies(nblocks, 0);
  absl::Status s;
  uint64_t allocated = 0;
  uint64_t table = 0;
  if (nblocks > 0) {
    absl::StatusOr<uint64_t> t = heap::Allocate(ctx, 8 * nblocks);
    if (!t.ok()) return t.status();
    table = *t;
  }
  for (uint64_t b = 0; b < src_blocks.size() && s.ok(); ++b) {
    if (src_blocks[b] == 0) continue;
    // A block as big as the source's bytes in it; its rounding past them reads as zeros.
    uint64_t used = UsedInBlock(src.size, b);
    absl::StatusOr<uint64_t> block = heap::Allocate(ctx, used);
    if (!block.ok()) {
      s = block.status();
      break;
    }
    copies[b] = *block;
    ++allocated;
    uint64_t pad = heap::CapacityFor(used) - used;
    if (ctx.IsLocal()) {
      absl::StatusOr<std::string_view> view = ctx.View(src_blocks[b], used);
      s = view.ok() ? ctx.Write(*block, *view) : view.status();
    } else {
      absl::StatusOr<std::string> bytes = ctx.Read(src_blocks[b], used);
      s = bytes.ok() ? ctx.Write(*block, *bytes) : bytes.status();
    }
    if (s.ok() && pad > 0) s = ctx.Write(*block + used, std::string(pad, '\0'));
  }
  if (s.ok() && table != 0) {
    s = ctx.Write(
        table, std::string_view(reinterpret_cast<const char*>(copies.data()), 8 * copies.size()));
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
    ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> blocks, ReadTable(ctx, old.table, old.capacity));
    ARDMA_RETURN_IF_ERROR(FreeBlocks(ctx, fs, blocks));
    ARDMA_RETURN_IF_ERROR(heap::Free(ctx, old.table));
  }
  ARDMA_ASSIGN_OR_RETURN(Inode done, ReadInode(ctx, dst.ino));
  return done.ToStat();
}

absl::StatusOr<Usage> GetUsage(Context& ctx, const Fs& fs) {
  char b[kSuperBytes];
  ARDMA_RETURN_IF_ERROR(ctx.Read(fs.sb, std::span<char>(b, sizeof(b))));
  Usage u;
  ARDMA_ASSIGN_OR_RETURN(heap::HeapReport heap_report, heap::Check(ctx));
  u.heap_allocated = heap_report.live_bytes();
  u.heap_size = heap_report.data_bytes;
  u.files = Field(b, kSbFiles);
  u.directories = Field(b, kSbDirs);
  u.data_blocks = Field(b, kSbBlocks);
  u.orphans = Field(b, kSbOrphans);
  return u;
}

}  // namespace ardma::dfs
