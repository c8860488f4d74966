// The file system's operations on names: make, stat, open, readdir, remove, rename, setattr.
#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "services/dfs/dfs.h"
#include "services/dfs/dfs_content.h"

namespace ardma::dfs {

absl::StatusOr<Stat> Make(Context& ctx, const Fs& fs, std::string_view path, FileType type,
                          uint32_t mode, bool exclusive, std::string_view content) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  if (parts.empty()) return absl::AlreadyExistsError("dfs: / exists");
  if (type == FileType::kFile) ARDMA_RETURN_IF_ERROR(PrepareForPeers(ctx, fs));
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
    return n.ToStat();
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, NewInode(ctx, type, dir.ino, place.name, mode & 07777));
  ARDMA_RETURN_IF_ERROR(
      ctx.FetchAdd(fs.sb + (type == FileType::kDirectory ? kSbDirs : kSbFiles), 1).status());
  // A file's bytes go to its data slot's member on a cluster; a link's target stays here.
  absl::Status s = fs.spread && type == FileType::kFile ? CreateContent(ctx, fs, ino, mode & 07777)
                                                        : FillNewInode(ctx, fs, ino, content);
  if (!s.ok()) {
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
    DiscardInode(ctx, fs, n).IgnoreError();
    return s;
  }
  s = PutEntry(ctx, fs, dir.ino, place.name, Entry{ino, type});
  if (s.ok()) {
    s = AppendChild(ctx, dir, ino);
    if (!s.ok()) RemoveEntry(ctx, fs, dir.ino, place.name).IgnoreError();
  }
  if (!s.ok()) {
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
    DiscardInode(ctx, fs, n).IgnoreError();  // also counts it off
    return s;
  }
  ARDMA_RETURN_IF_ERROR(locks.Release());
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  return n.ToStat();
}

absl::StatusOr<Stat> Symlink(Context& ctx, const Fs& fs, std::string_view path,
                             std::string_view target) {
  if (target.empty() || target.size() > kMaxPathBytes || target.find('\0') != target.npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("dfs: a symbolic link's target is 1 to ", kMaxPathBytes,
                     " bytes without NUL"));
  }
  return Make(ctx, fs, path, FileType::kSymlink, 0777, /*exclusive=*/true, target);
}

absl::StatusOr<Stat> StatPath(Context& ctx, const Fs& fs, std::string_view path, bool follow) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path, follow));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  return n.ToStat();
}

absl::StatusOr<Stat> OpenFile(Context& ctx, const Fs& fs, std::string_view path) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, ResolveFile(ctx, fs, path));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  return n.ToStat();
}

absl::StatusOr<DirPage> Readdir(Context& ctx, const Fs& fs, std::string_view path, uint64_t cursor,
                                uint32_t max) {
  max = std::clamp<uint32_t>(max, 1, kMaxPage);
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path, /*follow_last=*/true));
  ARDMA_ASSIGN_OR_RETURN(Inode dir, ReadInode(ctx, ino));
  if (dir.type != FileType::kDirectory) return NotADirectory();
  uint64_t end = std::min<uint64_t>(dir.size, cursor + max);
  ARDMA_ASSIGN_OR_RETURN(std::vector<uint64_t> children,
                         ReadTable(ctx, dir.table + 8 * cursor, end > cursor ? end - cursor : 0));
  // The children's names and types, one batch.
  std::vector<std::array<char, kInodeBytes>> inodes(children.size());
  std::vector<ReadOp> ops;
  for (size_t i = 0; i < children.size(); ++i) {
    ops.push_back({children[i], std::span<char>(inodes[i].data(), kInodeBytes)});
  }
  if (!ops.empty()) ARDMA_RETURN_IF_ERROR(ctx.ReadBatch(ops));
  DirPage page;
  page.next = end;
  page.done = end >= dir.size;
  for (size_t i = 0; i < children.size(); ++i) {
    const char* b = inodes[i].data();
    if (Field(b, 0) != kInodeMagic) continue;  // removed while we looked
    DirEntry e;
    e.name.assign(b + kInName, std::min<uint64_t>(Field(b, kInNameLen), kMaxNameBytes));
    e.type = static_cast<FileType>(Field(b, kInType));
    e.ino = children[i];
    e.size = Field(b, kInSize);
    e.mode = static_cast<uint32_t>(Field(b, kInMode));
    e.mtime = absl::FromUnixNanos(static_cast<int64_t>(Field(b, kInMtime)));
    e.ctime = absl::FromUnixNanos(static_cast<int64_t>(Field(b, kInCtime)));
    page.entries.push_back(std::move(e));
  }
  return page;
}

absl::Status Remove(Context& ctx, const Fs& fs, std::string_view path, FileType type) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, SplitPath(path));
  if (parts.empty()) {
    return type == FileType::kFile ? IsADirectory()
                                   : absl::FailedPreconditionError("dfs: cannot remove /");
  }
  if (type == FileType::kFile) ARDMA_RETURN_IF_ERROR(PrepareForPeers(ctx, fs));
  for (int attempt = 0; attempt < kMaxRetries; ++attempt) {
    ARDMA_ASSIGN_OR_RETURN(Place place, ResolvePlace(ctx, fs, path));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> e, LookupEntry(ctx, fs, place.parent, place.name));
    if (!e) return NoSuchEntry(path);
    if ((e->type == FileType::kDirectory) != (type == FileType::kDirectory)) {
      return type == FileType::kDirectory ? NotADirectory() : IsADirectory();
    }
    Locks locks(ctx);
    ARDMA_RETURN_IF_ERROR(locks.Take({place.parent + kInLock, e->ino + kInLock}));
    // Re-check under the locks: the entry may have moved meanwhile.
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> again,
                           LookupEntry(ctx, fs, place.parent, place.name));
    if (!again || again->ino != e->ino) continue;
    ARDMA_ASSIGN_OR_RETURN(Inode dir, ReadInode(ctx, place.parent));
    ARDMA_ASSIGN_OR_RETURN(Inode victim, ReadInode(ctx, e->ino));
    if (type == FileType::kDirectory && victim.size > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("dfs: directory not empty: ", ToAbsl(path)));
    }
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(victim.ino + kInRemoved, 1));
    ARDMA_RETURN_IF_ERROR(RemoveEntry(ctx, fs, dir.ino, place.name));
    ARDMA_RETURN_IF_ERROR(RemoveChild(ctx, dir, victim.index));
    ARDMA_RETURN_IF_ERROR(SetFields(ctx, victim.ino, {{kInGen, victim.gen + 2}}));
    ARDMA_RETURN_IF_ERROR(locks.Release());
    return DiscardInode(ctx, fs, victim);
  }
  return absl::AbortedError("dfs: the entry kept changing");
}

absl::Status Rename(Context& ctx, const Fs& fs, std::string_view from, std::string_view to) {
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> from_parts, SplitPath(from));
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> to_parts, SplitPath(to));
  if (from_parts.empty() || to_parts.empty()) {
    return absl::InvalidArgumentError("dfs: cannot rename / or onto /");
  }
  ARDMA_RETURN_IF_ERROR(PrepareForPeers(ctx, fs));  // a file it replaces has contents to free
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
    if (target && target->ino == moving->ino) return absl::OkStatus();  // the same file
    if (moving->type == FileType::kDirectory) {
      ARDMA_RETURN_IF_ERROR(CheckNotBelow(ctx, fs, dst.parent, moving->ino,
                                          "dfs: cannot move a directory into itself"));
    }
    if (target) {
      bool moving_dir = moving->type == FileType::kDirectory;
      bool target_dir = target->type == FileType::kDirectory;
      if (!moving_dir && target_dir) return IsADirectory();
      if (moving_dir && !target_dir) return NotADirectory();
    }
    std::vector<uint64_t> words = {src.parent + kInLock, dst.parent + kInLock,
                                   moving->ino + kInLock};
    if (target) words.push_back(target->ino + kInLock);
    Locks locks(ctx);
    ARDMA_RETURN_IF_ERROR(locks.Take(words));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> moving2,
                           LookupEntry(ctx, fs, src.parent, src.name));
    ARDMA_ASSIGN_OR_RETURN(std::optional<Entry> target2,
                           LookupEntry(ctx, fs, dst.parent, dst.name));
    if (!moving2 || moving2->ino != moving->ino || target.has_value() != target2.has_value() ||
        (target && target2->ino != target->ino)) {
      continue;  // changed before we locked: start again
    }
    std::optional<Inode> replaced;
    if (target) {
      ARDMA_ASSIGN_OR_RETURN(Inode t, ReadInode(ctx, target->ino));
      if (t.type == FileType::kDirectory && t.size > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("dfs: directory not empty: ", ToAbsl(to)));
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
    if (replaced) ARDMA_RETURN_IF_ERROR(DiscardInode(ctx, fs, *replaced));
    return absl::OkStatus();
  }
  return absl::AbortedError("dfs: the entries kept changing");
}

absl::Status SetAttr(Context& ctx, const Fs& fs, std::string_view path, uint32_t mode,
                     uint64_t mtime, bool follow) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path, follow));
  Locks locks(ctx);
  ARDMA_RETURN_IF_ERROR(locks.Take({ino + kInLock}));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
  uint64_t now = static_cast<uint64_t>(NowNs());
  ARDMA_RETURN_IF_ERROR(SetFields(ctx, ino,
                                  {{kInMode, mode & 07777},
                                   {kInMtime, mtime != 0 ? mtime : static_cast<uint64_t>(n.mtime)},
                                   {kInCtime, now},
                                   {kInGen, n.gen + 2}}));
  return locks.Release();
}

}  // namespace ardma::dfs
