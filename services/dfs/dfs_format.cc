#include "services/dfs/dfs_format.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/slots.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/wire/frame.h"
#include "services/service_name.h"

namespace ardma::dfs {

uint32_t NamespaceSlot(std::string_view fs) { return slots::SlotOf(kNamespaceSpace, fs); }

uint32_t DataSlot(std::string_view fs, uint64_t ino) {
  // The inode number in hex: its bytes could hold a "{tag}" that SlotOf would hash alone.
  return slots::SlotOf(absl::StrCat("dfs.", ToAbsl(fs), ".data"), absl::StrCat(absl::Hex(ino)));
}

absl::Status CheckFsName(std::string_view name) {
  return CheckServiceName(name, kMaxFsNameBytes, "file system");
}

absl::StatusOr<std::vector<std::string_view>> SplitPath(std::string_view path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("paths are absolute: '", ToAbsl(path), "'"));
  }
  if (path.size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("paths are at most ", kMaxPathBytes, " bytes"));
  }
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("paths contain no NUL bytes");
  }
  std::vector<std::string_view> parts;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(pos, end - pos);
    if (part.size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("path components are at most ", kMaxNameBytes, " bytes"));
    }
    if (!part.empty()) parts.push_back(part);
    pos = end + 1;
  }
  return parts;
}

int ErrnoOf(const absl::Status& s) {
  absl::string_view m = s.message();
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kResourceExhausted:
      return ENOSPC;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return EACCES;
    case absl::StatusCode::kFailedPrecondition:
      if (absl::StrContains(m, "not empty")) return ENOTEMPTY;
      if (absl::StrContains(m, "not a directory")) return ENOTDIR;
      if (absl::StrContains(m, "is a directory")) return EISDIR;
      if (absl::StrContains(m, "symbolic links")) return ELOOP;
      if (absl::StrContains(m, "cannot remove /")) return EBUSY;
      return EPERM;
    case absl::StatusCode::kInvalidArgument:
      if (absl::StrContains(m, "component") || absl::StrContains(m, "too long")) {
        return ENAMETOOLONG;
      }
      return EINVAL;
    default:
      return 0;
  }
}

std::string ErrnoText(const absl::Status& s) {
  int e = ErrnoOf(s);
  // EINVAL's, EPERM's and EACCES's texts say less than the message (which names what is missing,
  // e.g. authentication).
  if (e == 0 || e == EINVAL || e == EPERM || e == EACCES) return std::string(s.message());
  return ::strerrordesc_np(e);
}

std::string EncodeStat(const Stat& s) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U64(s.ino);
  w.U8(static_cast<uint8_t>(s.type));
  w.U64(s.size);
  w.U32(s.mode);
  w.U64(static_cast<uint64_t>(absl::ToUnixNanos(s.mtime)));
  w.U64(static_cast<uint64_t>(absl::ToUnixNanos(s.ctime)));
  return out;
}

absl::StatusOr<Stat> DecodeStat(std::string_view bytes) {
  wire::ByteReader r(bytes);
  Stat s;
  uint8_t type;
  uint64_t mtime, ctime;
  if (!r.U64(&s.ino) || !r.U8(&type) || !r.U64(&s.size) || !r.U32(&s.mode) || !r.U64(&mtime) ||
      !r.U64(&ctime) || !r.AtEnd() || !ValidFileType(type)) {
    return absl::DataLossError("dfs: bad stat");
  }
  s.type = static_cast<FileType>(type);
  s.mtime = absl::FromUnixNanos(static_cast<int64_t>(mtime));
  s.ctime = absl::FromUnixNanos(static_cast<int64_t>(ctime));
  return s;
}

std::string EncodeDirPage(const DirPage& page) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U64(page.next);
  w.U8(page.done ? 1 : 0);
  w.U32(static_cast<uint32_t>(page.entries.size()));
  for (const DirEntry& e : page.entries) {
    w.U64(e.ino);
    w.U8(static_cast<uint8_t>(e.type));
    w.Str16(e.name);
    w.U64(e.size);
    w.U32(e.mode);
    w.U64(static_cast<uint64_t>(absl::ToUnixNanos(e.mtime)));
    w.U64(static_cast<uint64_t>(absl::ToUnixNanos(e.ctime)));
  }
  return out;
}

absl::StatusOr<DirPage> DecodeDirPage(std::string_view bytes) {
  wire::ByteReader r(bytes);
  DirPage page;
  uint8_t done;
  uint32_t n;
  if (!r.U64(&page.next) || !r.U8(&done) || !r.U32(&n)) return absl::DataLossError("dfs: bad page");
  page.done = done != 0;
  for (uint32_t i = 0; i < n; ++i) {
    DirEntry e;
    uint8_t type;
    std::string_view name;
    uint64_t mtime, ctime;
    if (!r.U64(&e.ino) || !r.U8(&type) || !r.Str16(&name) || !r.U64(&e.size) ||
        !r.U32(&e.mode) || !r.U64(&mtime) || !r.U64(&ctime) || !ValidFileType(type)) {
      return absl::DataLossError("dfs: bad page");
    }
    e.type = static_cast<FileType>(type);
    e.mtime = absl::FromUnixNanos(static_cast<int64_t>(mtime));
    e.ctime = absl::FromUnixNanos(static_cast<int64_t>(ctime));
    e.name = std::string(name);
    page.entries.push_back(std::move(e));
  }
  if (!r.AtEnd()) return absl::DataLossError("dfs: bad readdir result");
  return page;
}

std::string EncodeFindPage(const FindPage& page) {
  std::string out;
  wire::ByteWriter w(&out);
  w.Bytes32(page.next);
  w.U8(page.done ? 1 : 0);
  w.U32(static_cast<uint32_t>(page.entries.size()));
  for (const FoundEntry& e : page.entries) {
    w.Str16(e.path);
    w.U8(static_cast<uint8_t>(e.type));
    w.U64(e.size);
    w.U32(e.depth);
    w.U32(e.mode);
    w.U64(static_cast<uint64_t>(absl::ToUnixNanos(e.mtime)));
    w.U64(e.ino);
  }
  return out;
}

absl::StatusOr<FindPage> DecodeFindPage(std::string_view bytes) {
  wire::ByteReader r(bytes);
  FindPage page;
  std::string_view next;
  uint8_t done;
  uint32_t n;
  if (!r.Bytes32(&next) || !r.U8(&done) || !r.U32(&n)) {
    return absl::DataLossError("dfs: bad find page");
  }
  page.next = std::string(next);
  page.done = done != 0;
  for (uint32_t i = 0; i < n; ++i) {
    FoundEntry e;
    std::string_view path;
    uint8_t type;
    uint64_t mtime;
    if (!r.Str16(&path) || !r.U8(&type) || !r.U64(&e.size) || !r.U32(&e.depth) || !r.U32(&e.mode) ||
        !r.U64(&mtime) || !r.U64(&e.ino) || !ValidFileType(type)) {
      return absl::DataLossError("dfs: bad find entry");
    }
    e.path = std::string(path);
    e.type = static_cast<FileType>(type);
    e.mtime = absl::FromUnixNanos(static_cast<int64_t>(mtime));
    page.entries.push_back(std::move(e));
  }
  if (!r.AtEnd()) return absl::DataLossError("dfs: trailing bytes in find page");
  return page;
}

void EncodeBatchOps(std::span<const BatchOp> ops, std::string* out) {
  wire::ByteWriter w(out);
  w.U32(static_cast<uint32_t>(ops.size()));
  for (const BatchOp& op : ops) {
    w.U8(static_cast<uint8_t>(op.kind));
    w.U8(op.flags);
    w.U32(op.mode);
    w.U64(op.mtime_ns);
    w.Str16(op.path);
    w.Bytes32(op.data);
  }
}

absl::StatusOr<std::vector<BatchOp>> DecodeBatchOps(std::string_view bytes) {
  wire::ByteReader r(bytes);
  uint32_t n;
  if (!r.U32(&n) || n > kMaxBatchOps) return absl::InvalidArgumentError("dfs.batch: bad count");
  std::vector<BatchOp> ops(n);
  for (BatchOp& op : ops) {
    uint8_t kind;
    if (!r.U8(&kind) || !r.U8(&op.flags) || !r.U32(&op.mode) || !r.U64(&op.mtime_ns) ||
        !r.Str16(&op.path) || !r.Bytes32(&op.data) || kind < 1 || kind > 4) {
      return absl::InvalidArgumentError("dfs.batch: bad operation");
    }
    op.kind = static_cast<BatchKind>(kind);
  }
  if (!r.AtEnd()) return absl::InvalidArgumentError("dfs.batch: trailing bytes");
  return ops;
}

std::string EncodeBatchResults(std::span<const absl::Status> results) {
  std::string out;
  wire::ByteWriter w(&out);
  w.U32(static_cast<uint32_t>(results.size()));
  for (const absl::Status& s : results) {
    w.U16(wire::StatusToWire(s.code()));
    w.Str16(FromAbsl(s.message()).substr(0, 1024));
  }
  return out;
}

absl::StatusOr<std::vector<absl::Status>> DecodeBatchResults(std::string_view bytes) {
  wire::ByteReader r(bytes);
  uint32_t n;
  if (!r.U32(&n) || n > kMaxBatchOps) return absl::DataLossError("dfs: bad batch result");
  std::vector<absl::Status> results;
  for (uint32_t i = 0; i < n; ++i) {
    uint16_t code;
    std::string_view message;
    if (!r.U16(&code) || !r.Str16(&message)) return absl::DataLossError("dfs: bad batch result");
    results.push_back(wire::StatusFromWire(code, message));
  }
  if (!r.AtEnd()) return absl::DataLossError("dfs: bad batch result");
  return results;
}

}  // namespace ardma::dfs
