// The "dfs" active-code library: each function parses its arguments, opens the file system,
// runs the algorithm (dfs.h) and encodes the result (dfs_format.h). Every function's arguments
// start with Str16 fs-name (but pread and pwrite, which take a handle).
//
//   dfs.mkdir    path:Str16 mode:u32                         -> stat
//   dfs.create   path:Str16 mode:u32 exclusive:u8            -> stat
//   dfs.stat     path:Str16 [follow:u8]                      -> stat (lstat; stat if follow)
//   dfs.readdir  path:Str16 cursor:u64 max:u32               -> next:u64 done:u8 n:u32
//                                                               n x (ino:u64 type:u8 name:Str16)
//   dfs.unlink   path:Str16                                  -> ""
//   dfs.rmdir    path:Str16                                  -> ""
//   dfs.rename   from:Str16 to:Str16                         -> ""
//   dfs.read     path:Str16 offset:u64 len:u64               -> bytes (short at end of file)
//   dfs.write    path:Str16 offset:u64 data:Bytes32          -> size:u64
//   dfs.truncate path:Str16 len:u64                          -> ""
//   dfs.copy     from:Str16 to:Str16                         -> stat of the copy
//   dfs.find     path:Str16 cursor:Bytes32 max:u32 [max_depth:u32 [follow_start:u8]]
//                                                            -> next:Bytes32 done:u8 n:u32
//                                    n x (path:Str16 type:u8 size:u64 depth:u32 mode:u32 mtime:u64
//                                             ino:u64)
//   dfs.usage    ()                     -> files dirs blocks heap_allocated heap_size orphans
//   dfs.setattr  path:Str16 mode:u32 mtime_ns:u64 (0: keep)  -> ""
//   dfs.copytree from:Str16 to:Str16 no_clobber:u8 preserve:u8 [umask:u32] -> files:u64 dirs:u64
//   dfs.open     path:Str16                    -> sb:u64 stat remote:u8 (a file handle; remote:
//                                   its bytes are on its data slot's member: dfs_content.h)
// File handles (POSIX-like: they follow the inode through renames) skip path resolution; these two
// take the handle instead of the fs name:
//   dfs.pread    sb:u64 ino:u64 offset:u64 len:u64 [fs:Str16]          -> bytes
//   dfs.pwrite   sb:u64 ino:u64 offset:u64 data:Bytes32 [fs:Str16]     -> size:u64
// (fs is needed for a remote file, whose bytes these calls fetch from their member.)
// On a cluster, the content functions of dfs_content.h too.
// Paths follow symbolic links as the kernel's do (dfs_inode.h): every one before the last
// component; the last one for stat with follow, open, readdir and the data operations, never for
// the operations on names. Links:
//   dfs.symlink  path:Str16 target:Str16                     -> stat of the link
//   dfs.readlink path:Str16                                  -> target
// Many changes in one request (a tree upload), each with its own result (dfs_format.h):
//   dfs.batch    n:u32 n x (kind flags mode mtime path data) -> n:u32 n x (code:u16 message:Str16)
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "services/dfs/dfs.h"
#include "services/dfs/dfs_content.h"

namespace ardma::dfs::functions {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

// The fs-name and the paths every function but pread/pwrite starts with; `r` reads on after them.
struct Request {
  explicit Request(std::string_view args) : r(args) {}
  ByteReader r;
  std::string_view fs_name, path, to;

  // Parses fs-name and `paths` (1 or 2) paths.
  absl::Status Parse(int paths) {
    if (!r.Str16(&fs_name)) return absl::InvalidArgumentError("dfs: missing file system name");
    if (!r.Str16(&path) || (paths == 2 && !r.Str16(&to))) {
      return absl::InvalidArgumentError("dfs: missing path");
    }
    return absl::OkStatus();
  }
  absl::Status End(std::string_view trailing_error) {
    return r.AtEnd() ? absl::OkStatus() : absl::InvalidArgumentError(ToAbsl(trailing_error));
  }
};

std::string U64Result(uint64_t v) {
  std::string out;
  ByteWriter(&out).U64(v);
  return out;
}

// mkdir and create.
absl::StatusOr<std::string> MakeFn(Context& ctx, std::string_view args, FileType type) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint32_t mode;
  uint8_t exclusive = 1;
  if (!q.r.U32(&mode) || (type == FileType::kFile && !q.r.U8(&exclusive)) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(Stat st, Make(ctx, fs, q.path, type, mode, exclusive != 0));
  return EncodeStat(st);
}

absl::StatusOr<std::string> Mkdir(Context& ctx, std::string_view args) {
  return MakeFn(ctx, args, FileType::kDirectory);
}

absl::StatusOr<std::string> Create(Context& ctx, std::string_view args) {
  return MakeFn(ctx, args, FileType::kFile);
}

absl::StatusOr<std::string> StatFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint8_t follow = 0;
  if (!q.r.AtEnd() && !q.r.U8(&follow)) return absl::InvalidArgumentError("dfs.stat: bad flag");
  ARDMA_RETURN_IF_ERROR(q.End("dfs.stat: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(Stat st, StatPath(ctx, fs, q.path, follow != 0));
  return EncodeStat(st);
}

// A handle for pread / pwrite: the superblock and the file's inode (then its stat).
absl::StatusOr<std::string> Open(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  ARDMA_RETURN_IF_ERROR(q.End("dfs.open: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(Stat st, OpenFile(ctx, fs, q.path));
  ARDMA_ASSIGN_OR_RETURN(Inode n, ReadInode(ctx, st.ino));
  return U64Result(fs.sb) + EncodeStat(st) + std::string(1, n.remote ? '\1' : '\0');
}

absl::StatusOr<std::string> Readdir(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint64_t cursor;
  uint32_t max;
  if (!q.r.U64(&cursor) || !q.r.U32(&max) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.readdir: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(DirPage page, dfs::Readdir(ctx, fs, q.path, cursor, max));
  return EncodeDirPage(page);
}

// unlink and rmdir.
absl::StatusOr<std::string> RemoveFn(Context& ctx, std::string_view args, FileType type) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  ARDMA_RETURN_IF_ERROR(q.End("dfs: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_RETURN_IF_ERROR(Remove(ctx, fs, q.path, type));
  return std::string();
}

absl::StatusOr<std::string> Unlink(Context& ctx, std::string_view args) {
  return RemoveFn(ctx, args, FileType::kFile);
}

absl::StatusOr<std::string> Rmdir(Context& ctx, std::string_view args) {
  return RemoveFn(ctx, args, FileType::kDirectory);
}

absl::StatusOr<std::string> RenameFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(2));
  ARDMA_RETURN_IF_ERROR(q.End("dfs.rename: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_RETURN_IF_ERROR(Rename(ctx, fs, q.path, q.to));
  return std::string();
}

absl::StatusOr<std::string> ReadFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint64_t offset, len;
  if (!q.r.U64(&offset) || !q.r.U64(&len) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.read: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  return Read(ctx, fs, q.path, offset, len);
}

absl::StatusOr<std::string> PreadFn(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t sb, ino, offset, len;
  std::string_view fs_name;
  if (!r.U64(&sb) || !r.U64(&ino) || !r.U64(&offset) || !r.U64(&len) ||
      (!r.AtEnd() && !r.Str16(&fs_name)) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.pread: bad arguments");
  }
  return Pread(ctx, ino, offset, len, fs_name);
}

absl::StatusOr<std::string> WriteFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint64_t offset;
  std::string_view data;
  if (!q.r.U64(&offset) || !q.r.Bytes32(&data) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.write: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(uint64_t size, Write(ctx, fs, q.path, offset, data));
  return U64Result(size);
}

absl::StatusOr<std::string> PwriteFn(Context& ctx, std::string_view args) {
  ByteReader r(args);
  uint64_t sb, ino, offset;
  std::string_view data, fs_name;
  if (!r.U64(&sb) || !r.U64(&ino) || !r.U64(&offset) || !r.Bytes32(&data) ||
      (!r.AtEnd() && !r.Str16(&fs_name)) || !r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.pwrite: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t size, Pwrite(ctx, sb, ino, offset, data, fs_name));
  return U64Result(size);
}

absl::StatusOr<std::string> TruncateFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint64_t len;
  if (!q.r.U64(&len) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.truncate: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_RETURN_IF_ERROR(Truncate(ctx, fs, q.path, len));
  return std::string();
}

absl::StatusOr<std::string> CopyFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(2));
  ARDMA_RETURN_IF_ERROR(q.End("dfs.copy: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(Stat st, Copy(ctx, fs, q.path, q.to));
  return EncodeStat(st);
}

absl::StatusOr<std::string> FindFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  std::string_view cursor;
  uint32_t max, max_depth = UINT32_MAX;
  uint8_t follow = 0;
  if (!q.r.Bytes32(&cursor) || !q.r.U32(&max) || (!q.r.AtEnd() && !q.r.U32(&max_depth)) ||
      (!q.r.AtEnd() && !q.r.U8(&follow)) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.find: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(FindPage page,
                         Find(ctx, fs, q.path, cursor, max, max_depth, follow != 0));
  return EncodeFindPage(page);
}

absl::StatusOr<std::string> SetAttrFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  uint32_t mode;
  uint64_t mtime;
  if (!q.r.U32(&mode) || !q.r.U64(&mtime) || !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.setattr: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_RETURN_IF_ERROR(SetAttr(ctx, fs, q.path, mode, mtime));
  return std::string();
}

absl::StatusOr<std::string> CopyTreeFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(2));
  uint8_t no_clobber, preserve;
  uint32_t umask = 0;
  if (!q.r.U8(&no_clobber) || !q.r.U8(&preserve) || (!q.r.AtEnd() && !q.r.U32(&umask)) ||
      !q.r.AtEnd()) {
    return absl::InvalidArgumentError("dfs.copytree: bad arguments");
  }
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_RETURN_IF_ERROR(PrepareForPeers(ctx, fs));
  ARDMA_ASSIGN_OR_RETURN(TreeCopy copied,
                         CopyTree(ctx, fs, q.path, q.to, no_clobber != 0, preserve != 0, umask & 0777));
  return U64Result(copied.files) + U64Result(copied.dirs);
}

absl::StatusOr<std::string> SymlinkFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(2));  // the link's path, then its target
  ARDMA_RETURN_IF_ERROR(q.End("dfs.symlink: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  ARDMA_ASSIGN_OR_RETURN(Stat st, Symlink(ctx, fs, q.path, q.to));
  return EncodeStat(st);
}

absl::StatusOr<std::string> ReadlinkFn(Context& ctx, std::string_view args) {
  Request q(args);
  ARDMA_RETURN_IF_ERROR(q.Parse(1));
  ARDMA_RETURN_IF_ERROR(q.End("dfs.readlink: trailing bytes"));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, q.fs_name));
  return Readlink(ctx, fs, q.path);
}

absl::StatusOr<std::string> BatchFn(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name)) return absl::InvalidArgumentError("dfs: missing file system name");
  ARDMA_ASSIGN_OR_RETURN(std::vector<BatchOp> ops, DecodeBatchOps(r.Rest()));
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, name));
  ARDMA_RETURN_IF_ERROR(PrepareForPeers(ctx, fs));
  return EncodeBatchResults(ApplyBatch(ctx, fs, ops));
}

absl::StatusOr<std::string> UsageFn(Context& ctx, std::string_view args) {
  ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name)) return absl::InvalidArgumentError("dfs: missing file system name");
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.usage: trailing bytes");
  ARDMA_ASSIGN_OR_RETURN(Fs fs, OpenFs(ctx, name));
  ARDMA_ASSIGN_OR_RETURN(Usage u, GetUsage(ctx, fs));
  return U64Result(u.files) + U64Result(u.directories) + U64Result(u.data_blocks) +
         U64Result(u.heap_allocated) + U64Result(u.heap_size) + U64Result(u.orphans);
}

}  // namespace
}  // namespace ardma::dfs::functions

ARDMA_ACTIVE_LIBRARY(
    dfs, {"dfs.mkdir", &ardma::dfs::functions::Mkdir},
    {"dfs.create", &ardma::dfs::functions::Create}, {"dfs.stat", &ardma::dfs::functions::StatFn},
    {"dfs.readdir", &ardma::dfs::functions::Readdir},
    {"dfs.unlink", &ardma::dfs::functions::Unlink}, {"dfs.rmdir", &ardma::dfs::functions::Rmdir},
    {"dfs.rename", &ardma::dfs::functions::RenameFn}, {"dfs.read", &ardma::dfs::functions::ReadFn},
    {"dfs.write", &ardma::dfs::functions::WriteFn},
    {"dfs.truncate", &ardma::dfs::functions::TruncateFn},
    {"dfs.copy", &ardma::dfs::functions::CopyFn}, {"dfs.find", &ardma::dfs::functions::FindFn},
    {"dfs.usage", &ardma::dfs::functions::UsageFn}, {"dfs.open", &ardma::dfs::functions::Open},
    {"dfs.pread", &ardma::dfs::functions::PreadFn},
    {"dfs.pwrite", &ardma::dfs::functions::PwriteFn},
    {"dfs.setattr", &ardma::dfs::functions::SetAttrFn},
    {"dfs.copytree", &ardma::dfs::functions::CopyTreeFn},
    {"dfs.symlink", &ardma::dfs::functions::SymlinkFn},
    {"dfs.readlink", &ardma::dfs::functions::ReadlinkFn},
    {"dfs.batch", &ardma::dfs::functions::BatchFn},
    {"dfs.ccreate", &ardma::dfs::content_functions::Create},
    {"dfs.cread", &ardma::dfs::content_functions::Read},
    {"dfs.cwrite", &ardma::dfs::content_functions::Write},
    {"dfs.ctruncate", &ardma::dfs::content_functions::Truncate},
    {"dfs.cfree", &ardma::dfs::content_functions::Free},
    {"dfs.ccopy", &ardma::dfs::content_functions::Copy},
    {"dfs.cusage", &ardma::dfs::content_functions::Usage},
    {"dfs.copen", &ardma::dfs::content_functions::Open},
    {"dfs.csync", &ardma::dfs::content_functions::Sync});
