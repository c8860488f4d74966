#define FUSE_USE_VERSION 312
#include "apps/mount/dfs_fuse.h"

#include <fuse_lowlevel.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace ardma::mount {
namespace {

using dfs::FileType;

DfsFuse& Self(fuse_req_t req) { return *static_cast<DfsFuse*>(fuse_req_userdata(req)); }

void Fail(fuse_req_t req, const absl::Status& s) { fuse_reply_err(req, ErrnoFor(s)); }

fuse_entry_param Entry(DfsFuse& self, uint64_t id, const struct stat& st) {
  fuse_entry_param e{};
  e.ino = id;
  e.attr = st;
  e.attr_timeout = self.options().attr_timeout;
  e.entry_timeout = self.options().entry_timeout;
  return e;
}

// Replies with the entry of the node just made or found at `path`.
void ReplyEntry(fuse_req_t req, const std::string& path, const dfs::Stat& st) {
  DfsFuse& self = Self(req);
  uint64_t id = self.NodeId(st.ino);
  self.Remember(id, path);
  fuse_entry_param e = Entry(self, id, self.ToStat(st));
  fuse_reply_entry(req, &e);
}

void Init(void* userdata, fuse_conn_info* conn) {
  auto* self = static_cast<DfsFuse*>(userdata);
  conn->max_write = self->options().max_write;
  conn->max_readahead = 1u << 20;
  conn->time_gran = 1;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  if (self->options().writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
    conn->want |= FUSE_CAP_WRITEBACK_CACHE;
  }
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (std::strlen(name) > dfs::kMaxNameBytes) return (void)fuse_reply_err(req, ENAMETOOLONG);
  std::optional<std::string> path = Self(req).ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::Stat> st = Self(req).fs().Lookup(*path);
  if (!st.ok()) return Fail(req, st.status());
  ReplyEntry(req, *path, *st);
}

void ForgetOne(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Self(req).Forget(ino, nlookup);
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) Self(req).Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  std::optional<std::string> path = Self(req).PathOf(ino);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::Stat> st = Self(req).fs().Lookup(*path);
  if (!st.ok()) return Fail(req, st.status());
  struct stat attr = Self(req).ToStat(*st);
  fuse_reply_attr(req, &attr, Self(req).options().attr_timeout);
}

// chmod, truncate, utimens (one DFS call each; several at once cost one each, docs/mount.md).
void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  DfsFuse& self = Self(req);
  std::optional<std::string> path = self.PathOf(ino);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    // The DFS has no owners: everything belongs to the mount's user; only that is accepted.
    if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != getuid()) ||
        ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != getgid())) {
      return (void)fuse_reply_err(req, EPERM);
    }
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    absl::Status s = self.fs().Truncate(*path, static_cast<uint64_t>(attr->st_size));
    if (!s.ok()) return Fail(req, s);
  }
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
    absl::StatusOr<dfs::Stat> now = self.fs().Lookup(*path);
    if (!now.ok()) return Fail(req, now.status());
    uint32_t mode = (to_set & FUSE_SET_ATTR_MODE) ? attr->st_mode & 07777 : now->mode;
    absl::Time mtime = absl::InfinitePast();
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
      mtime = absl::Now();
    } else if (to_set & FUSE_SET_ATTR_MTIME) {
      mtime = absl::TimeFromTimespec(attr->st_mtim);
    }
    absl::Status s = self.fs().SetAttributes(*path, mode, mtime);
    if (!s.ok()) return Fail(req, s);
  }
  absl::StatusOr<dfs::Stat> st = self.fs().Lookup(*path);
  if (!st.ok()) return Fail(req, st.status());
  struct stat out = self.ToStat(*st);
  fuse_reply_attr(req, &out, self.options().attr_timeout);
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  std::optional<std::string> path = Self(req).PathOf(ino);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<std::string> target = Self(req).fs().Readlink(*path);
  if (!target.ok()) return Fail(req, target.status());
  fuse_reply_readlink(req, target->c_str());
}

void MkNod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  if (!S_ISREG(mode)) return (void)fuse_reply_err(req, EPERM);  // no FIFOs, devices, sockets
  std::optional<std::string> path = Self(req).ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::Stat> st = Self(req).fs().Create(*path, mode & 07777, /*exclusive=*/true);
  if (!st.ok()) return Fail(req, st.status());
  ReplyEntry(req, *path, *st);
}

void MkDir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  std::optional<std::string> path = Self(req).ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::Stat> st = Self(req).fs().Mkdir(*path, mode & 07777);
  if (!st.ok()) return Fail(req, st.status());
  ReplyEntry(req, *path, *st);
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::optional<std::string> path = Self(req).ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  fuse_reply_err(req, ErrnoFor(Self(req).fs().Unlink(*path)));
}

void RmDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::optional<std::string> path = Self(req).ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  fuse_reply_err(req, ErrnoFor(Self(req).fs().Rmdir(*path)));
}

void Symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  std::optional<std::string> path = Self(req).ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::Stat> st = Self(req).fs().Symlink(link, *path);
  if (!st.ok()) return Fail(req, st.status());
  ReplyEntry(req, *path, *st);
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
            const char* newname, unsigned int flags) {
  DfsFuse& self = Self(req);
  std::optional<std::string> from = self.ChildPath(parent, name);
  std::optional<std::string> to = self.ChildPath(newparent, newname);
  if (!from || !to) return (void)fuse_reply_err(req, ENOENT);
  if (flags & RENAME_EXCHANGE) return (void)fuse_reply_err(req, EINVAL);  // docs/mount.md
  if (flags & RENAME_NOREPLACE) {
    // Two requests, not atomic: a name made between them is replaced (docs/mount.md).
    absl::StatusOr<dfs::Stat> there = self.fs().Lookup(*to);
    if (there.ok()) return (void)fuse_reply_err(req, EEXIST);
  }
  absl::Status s = self.fs().Rename(*from, *to);
  if (s.ok()) self.Moved(*from, *to);
  fuse_reply_err(req, ErrnoFor(s));
}

void Link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) {
  fuse_reply_err(req, EPERM);  // no hard links in the DFS (docs/dfs.md)
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  DfsFuse& self = Self(req);
  std::optional<std::string> path = self.PathOf(ino);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::FileHandle> h = self.fs().Open(*path);
  if (!h.ok()) return Fail(req, h.status());
  self.LearnSuperblock(*h);
  if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
    absl::Status s = self.fs().Truncate(*path, 0);
    if (!s.ok()) return Fail(req, s);
  }
  fi->fh = self.AddHandle(*h);
  fuse_reply_open(req, fi);
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  DfsFuse& self = Self(req);
  std::optional<std::string> path = self.ChildPath(parent, name);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  absl::StatusOr<dfs::Stat> st =
      self.fs().Create(*path, mode & 07777, /*exclusive=*/(fi->flags & O_EXCL) != 0);
  if (!st.ok()) return Fail(req, st.status());
  if (st->type != FileType::kFile) return (void)fuse_reply_err(req, EISDIR);
  if (st->size > 0 && (fi->flags & O_TRUNC)) {
    absl::Status s = self.fs().Truncate(*path, 0);
    if (!s.ok()) return Fail(req, s);
    st->size = 0;
  }
  std::optional<dfs::FileHandle> h = self.HandleFor(st->ino);
  if (!h) {  // the first file this mount opens: learn the superblock
    absl::StatusOr<dfs::FileHandle> opened = self.fs().Open(*path);
    if (!opened.ok()) return Fail(req, opened.status());
    self.LearnSuperblock(*opened);
    h = *opened;
  }
  fi->fh = self.AddHandle(*h);
  uint64_t id = self.NodeId(st->ino);
  self.Remember(id, *path);
  fuse_entry_param e = Entry(self, id, self.ToStat(*st));
  fuse_reply_create(req, &e, fi);
}

void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  std::optional<dfs::FileHandle> h = Self(req).Handle(fi->fh);
  if (!h) return (void)fuse_reply_err(req, EBADF);
  absl::StatusOr<std::string> data = Self(req).fs().ReadAt(
      *h, static_cast<uint64_t>(off), std::min<size_t>(size, dfs::kMaxIoBytes));
  if (!data.ok()) return Fail(req, data.status());
  fuse_reply_buf(req, data->data(), data->size());
}

void Write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
           fuse_file_info* fi) {
  std::optional<dfs::FileHandle> h = Self(req).Handle(fi->fh);
  if (!h) return (void)fuse_reply_err(req, EBADF);
  absl::StatusOr<uint64_t> done =
      Self(req).fs().WriteAt(*h, static_cast<uint64_t>(off), std::string_view(buf, size));
  if (!done.ok()) return Fail(req, done.status());
  fuse_reply_write(req, size);
}

// Writes reach the server before they are answered: nothing is left to flush or sync.
void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }
void Fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }

void Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Self(req).DropHandle(fi->fh);
  fuse_reply_err(req, 0);
}

// readdir and readdirplus: "." and ".." at offsets 1 and 2, then the DFS's children from index
// off - 2, one page per request.
void ReadDirAny(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  DfsFuse& self = Self(req);
  std::optional<std::string> path = self.PathOf(ino);
  if (!path) return (void)fuse_reply_err(req, ENOENT);
  std::vector<char> buf(size);
  size_t used = 0;
  auto add = [&](const char* name, const struct stat& st, off_t next, bool remember,
                 const std::string& child) -> bool {
    size_t n;
    if (plus) {
      fuse_entry_param e = Entry(self, st.st_ino, st);
      n = fuse_add_direntry_plus(req, buf.data() + used, size - used, name, &e, next);
      if (n <= size - used && remember) self.Remember(st.st_ino, child);
    } else {
      n = fuse_add_direntry(req, buf.data() + used, size - used, name, &st, next);
    }
    if (n > size - used) return false;
    used += n;
    return true;
  };
  if (off < 1) {
    struct stat st {};
    st.st_ino = ino;
    st.st_mode = S_IFDIR;
    if (!add(".", st, 1, false, "")) return (void)fuse_reply_buf(req, buf.data(), used);
    off = 1;
  }
  if (off < 2) {
    struct stat st {};
    st.st_ino = 1;  // the kernel answers ".." itself; any directory will do here
    st.st_mode = S_IFDIR;
    if (!add("..", st, 2, false, "")) return (void)fuse_reply_buf(req, buf.data(), used);
    off = 2;
  }
  uint64_t cursor = static_cast<uint64_t>(off) - 2;
  uint32_t want = static_cast<uint32_t>(std::clamp<size_t>(size / 32, 1, 10000));
  absl::StatusOr<dfs::DirPage> page = self.fs().ReadDir(*path, cursor, want);
  if (!page.ok()) return Fail(req, page.status());
  for (size_t i = 0; i < page->entries.size(); ++i) {
    const dfs::DirEntry& e = page->entries[i];
    std::string child = *path == "/" ? "/" + e.name : *path + "/" + e.name;
    struct stat st = self.ToStat(e);
    if (!add(e.name.c_str(), st, static_cast<off_t>(cursor + i + 1 + 2), true, child)) break;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  ReadDirAny(req, ino, size, off, false);
}
void ReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  ReadDirAny(req, ino, size, off, true);
}

void StatFs(fuse_req_t req, fuse_ino_t) {
  absl::StatusOr<dfs::Usage> u = Self(req).fs().GetUsage();
  if (!u.ok()) return Fail(req, u.status());
  struct statvfs st {};
  st.f_bsize = st.f_frsize = 4096;
  st.f_blocks = u->heap_size / 4096;
  st.f_bfree = st.f_bavail =
      u->heap_size > u->heap_allocated ? (u->heap_size - u->heap_allocated) / 4096 : 0;
  st.f_files = u->files + u->directories + st.f_bfree / 2;  // an inode is a 512-byte block
  st.f_ffree = st.f_favail = st.f_bfree / 2;
  st.f_namemax = dfs::kMaxNameBytes;
  fuse_reply_statfs(req, &st);
}

}  // namespace

int ErrnoFor(const absl::Status& s) {
  if (int e = dfs::ErrnoOf(s); e != 0 || s.ok()) return e;
  ARDMA_LOG(kWarning, "ardma-mount: %s (EIO)", s.ToString());
  return EIO;
}

DfsFuse::DfsFuse(dfs::DfsClient* fs, MountOptions options, uint64_t root_ino)
    : fs_(fs), options_(options), uid_(getuid()), gid_(getgid()), root_ino_(root_ino) {
  nodes_[FUSE_ROOT_ID] = Node{"/", 1};
}

const fuse_lowlevel_ops& DfsFuse::Operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = Init;
    o.lookup = Lookup;
    o.forget = ForgetOne;
    o.forget_multi = ForgetMulti;
    o.getattr = GetAttr;
    o.setattr = SetAttr;
    o.readlink = ReadLink;
    o.mknod = MkNod;
    o.mkdir = MkDir;
    o.unlink = Unlink;
    o.rmdir = RmDir;
    o.symlink = Symlink;
    o.rename = Rename;
    o.link = Link;
    o.open = Open;
    o.create = Create;
    o.read = Read;
    o.write = Write;
    o.flush = Flush;
    o.fsync = Fsync;
    o.release = Release;
    o.readdir = ReadDir;
    o.readdirplus = ReadDirPlus;
    o.statfs = StatFs;
    return o;
  }();
  return ops;
}

std::optional<std::string> DfsFuse::PathOf(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.path;
}

std::optional<std::string> DfsFuse::ChildPath(uint64_t parent, const char* name) {
  std::optional<std::string> dir = PathOf(parent);
  if (!dir) return std::nullopt;
  return *dir == "/" ? absl::StrCat("/", name) : absl::StrCat(*dir, "/", name);
}

uint64_t DfsFuse::NodeId(uint64_t dfs_ino) const {
  return dfs_ino == root_ino_ ? FUSE_ROOT_ID : dfs_ino;
}

void DfsFuse::Remember(uint64_t id, const std::string& path) {
  absl::MutexLock lock(&mu_);
  Node& n = nodes_[id];
  n.path = path;  // a reused inode number names the newest file
  ++n.lookups;
}

void DfsFuse::Forget(uint64_t id, uint64_t nlookup) {
  if (id == FUSE_ROOT_ID) return;
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  it->second.lookups -= std::min(it->second.lookups, nlookup);
  if (it->second.lookups == 0) nodes_.erase(it);
}

void DfsFuse::Moved(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, n] : nodes_) {
    if (n.path == from) {
      n.path = to;
    } else if (n.path.size() > from.size() && n.path.compare(0, from.size(), from) == 0 &&
               n.path[from.size()] == '/') {
      n.path = to + n.path.substr(from.size());
    }
  }
}

struct stat DfsFuse::ToStat(const dfs::Stat& s) const {
  struct stat st {};
  st.st_ino = NodeId(s.ino);
  mode_t type = s.type == FileType::kDirectory ? S_IFDIR
                : s.type == FileType::kSymlink ? S_IFLNK
                                               : S_IFREG;
  st.st_mode = type | (s.mode & 07777);
  st.st_nlink = s.type == FileType::kDirectory ? 2 : 1;
  st.st_uid = uid_;
  st.st_gid = gid_;
  st.st_size = static_cast<off_t>(s.size);
  st.st_blksize = 65536;
  st.st_blocks = static_cast<blkcnt_t>((s.size + 511) / 512);
  st.st_mtim = st.st_atim = absl::ToTimespec(s.mtime);
  st.st_ctim = absl::ToTimespec(s.ctime);
  return st;
}

struct stat DfsFuse::ToStat(const dfs::DirEntry& e) const {
  return ToStat(dfs::Stat{e.ino, e.type, e.size, e.mode, e.mtime, e.ctime});
}

uint64_t DfsFuse::AddHandle(const dfs::FileHandle& h) {
  absl::MutexLock lock(&mu_);
  uint64_t id = next_handle_++;
  handles_[id] = h;
  return id;
}

std::optional<dfs::FileHandle> DfsFuse::Handle(uint64_t fh) {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(fh);
  if (it == handles_.end()) return std::nullopt;
  return it->second;
}

void DfsFuse::DropHandle(uint64_t fh) {
  absl::MutexLock lock(&mu_);
  handles_.erase(fh);
}

std::optional<dfs::FileHandle> DfsFuse::HandleFor(uint64_t dfs_ino) {
  absl::MutexLock lock(&mu_);
  if (sb_ == 0) return std::nullopt;
  return dfs::FileHandle{sb_, dfs_ino, remote_};
}

void DfsFuse::LearnSuperblock(const dfs::FileHandle& opened) {
  absl::MutexLock lock(&mu_);
  sb_ = opened.sb;
  remote_ = opened.remote;
}

}  // namespace ardma::mount
