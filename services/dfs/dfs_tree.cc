// The file system's walks: find (a resumable depth-first walk) and copytree (a whole tree
// copied in one request).
#include <algorithm>
#include <climits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs.h"

namespace ardma::dfs {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

// find: a depth-first walk in pre-order. The cursor is the walk's stack: per level the directory,
// the next child index and that directory's path.
struct Frame {
  uint64_t ino = 0, next = 0;
  std::string path;
};

std::string JoinPath(std::string_view dir, std::string_view name) {
  return dir == "/" ? absl::StrCat("/", ToAbsl(name))
                    : absl::StrCat(ToAbsl(dir), "/", ToAbsl(name));
}

}  // namespace

absl::StatusOr<FindPage> Find(Context& ctx, const Fs& fs, std::string_view path,
                              std::string_view cursor, uint32_t max, uint32_t max_depth,
                              bool follow_start) {
  max = std::clamp<uint32_t>(max, 1, kMaxPage);
  std::vector<Frame> stack;
  std::vector<FoundEntry> found;
  auto entry = [](std::string path, const Inode& n, uint32_t depth) {
    return FoundEntry{std::move(path), n.type,  n.size, depth,
                      n.mode,          absl::FromUnixNanos(n.mtime), n.ino};
  };
  if (cursor.empty()) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t ino, Resolve(ctx, fs, path, follow_start));
    ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, ino));
    std::string start = path.size() > 1 && path.back() == '/'
                            ? std::string(path.substr(0, path.size() - 1))
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
  return page;
}

namespace {

// Copies the symbolic link `from` as a link (GNU cp -r's -P): an existing non-directory at `to`
// is replaced, as cp does.
absl::Status CopyLink(Context& ctx, const Fs& fs, std::string_view from, std::string_view to) {
  ARDMA_ASSIGN_OR_RETURN(std::string target, Readlink(ctx, fs, from));
  absl::StatusOr<Stat> made = Symlink(ctx, fs, to, target);
  if (!absl::IsAlreadyExists(made.status())) return made.status();
  ARDMA_ASSIGN_OR_RETURN(Stat existing, StatPath(ctx, fs, to));
  if (existing.type == FileType::kDirectory) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dfs: cannot overwrite directory ", ToAbsl(to), " with non-directory"));
  }
  ARDMA_RETURN_IF_ERROR(Remove(ctx, fs, to, FileType::kFile));
  return Symlink(ctx, fs, to, target).status();
}

}  // namespace

// Walks `from` with Find, page by page; directories' attributes are set after their contents.
absl::StatusOr<TreeCopy> CopyTree(Context& ctx, const Fs& fs, std::string_view from,
                                  std::string_view to, bool no_clobber, bool preserve,
                                  uint32_t umask) {
  ARDMA_ASSIGN_OR_RETURN(uint64_t src, Resolve(ctx, fs, from));
  ARDMA_ASSIGN_OR_RETURN(Inode root, ReadInode(ctx, src));
  if (root.type != FileType::kDirectory) return NotADirectory();
  ARDMA_ASSIGN_OR_RETURN(Place place, ResolvePlace(ctx, fs, to));
  ARDMA_RETURN_IF_ERROR(
      CheckNotBelow(ctx, fs, place.parent, src, "dfs: cannot copy a directory into itself"));
  std::string base = std::string(to);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  TreeCopy copied;
  std::vector<std::tuple<std::string, uint32_t, int64_t>> dir_attrs;  // set after their contents
  std::string cursor;
  size_t strip = 0;
  for (bool first = true;; first = false) {
    ARDMA_ASSIGN_OR_RETURN(FindPage page, Find(ctx, fs, from, cursor, kMaxPage, UINT32_MAX));
    for (size_t i = 0; i < page.entries.size(); ++i) {
      const FoundEntry& entry = page.entries[i];
      std::string_view p = entry.path;
      uint32_t mode = preserve ? entry.mode : entry.mode & ~umask;
      uint64_t mtime = static_cast<uint64_t>(absl::ToUnixNanos(entry.mtime));
      if (first && i == 0) strip = p.size();  // the walk's own name for `from`
      std::string dst = base + std::string(p.substr(std::min(strip, p.size())));
      if (dst.empty()) dst = "/";
      if (entry.type == FileType::kDirectory) {
        absl::StatusOr<Stat> made = Make(ctx, fs, dst, FileType::kDirectory, mode, true);
        if (!made.ok() && !absl::IsAlreadyExists(made.status())) return made.status();
        if (!made.ok()) {
          ARDMA_ASSIGN_OR_RETURN(uint64_t existing, Resolve(ctx, fs, dst));
          ARDMA_ASSIGN_OR_RETURN(Inode e, ReadInode(ctx, existing));
          if (e.type != FileType::kDirectory) {
            return absl::FailedPreconditionError(
                absl::StrCat("dfs: cannot overwrite non-directory ", dst, " with a directory"));
          }
        }
        ++copied.dirs;
        if (preserve) dir_attrs.emplace_back(dst, mode, static_cast<int64_t>(mtime));
        continue;
      }
      if (no_clobber && Resolve(ctx, fs, dst).ok()) continue;
      if (entry.type == FileType::kSymlink) {
        ARDMA_RETURN_IF_ERROR(CopyLink(ctx, fs, p, dst));
      } else {
        ARDMA_ASSIGN_OR_RETURN(Stat made, Copy(ctx, fs, p, dst));
        if (!preserve && made.mode != (made.mode & ~umask)) {
          ARDMA_RETURN_IF_ERROR(SetAttr(ctx, fs, dst, made.mode & ~umask, 0));
        }
      }
      ++copied.files;
      if (preserve) ARDMA_RETURN_IF_ERROR(SetAttr(ctx, fs, dst, mode, mtime));
    }
    if (page.done) break;
    cursor = page.next;
  }
  for (auto it = dir_attrs.rbegin(); it != dir_attrs.rend(); ++it) {
    ARDMA_RETURN_IF_ERROR(SetAttr(ctx, fs, std::get<0>(*it), std::get<1>(*it),
                                  static_cast<uint64_t>(std::get<2>(*it))));
  }
  return copied;
}

}  // namespace ardma::dfs
