#include "apps/cp/copier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "apps/cp/tree_upload.h"
#include "core/status_macros.h"

namespace ardma::cp {

using dfs::FileType;

Location ParseLocation(const std::string& arg) {
  if (arg.rfind("dfs:", 0) == 0) return {true, arg.substr(4), arg};
  return {false, arg, arg};
}

Location Join(const Location& dir, const std::string& name) {
  std::string sep = !dir.path.empty() && dir.path.back() == '/' ? "" : "/";
  return ParseLocation((dir.remote ? "dfs:" : "") + dir.path + sep + name);
}

std::string Basename(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

namespace {

bool Utf8Locale() {
  for (const char* var : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') {
      std::string s(v);
      return s.find("UTF-8") != s.npos || s.find("utf8") != s.npos || s.find("utf-8") != s.npos;
    }
  }
  return false;
}

}  // namespace

std::string Quoted(std::string_view name) {
  static const bool utf8 = Utf8Locale();
  auto printable = [](unsigned char c) { return c >= 0x20 && c != 0x7f && (c < 0x80 || utf8); };
  bool all_printable = std::all_of(name.begin(), name.end(), printable);
  if (all_printable && name.find('\'') != name.npos && name.find_first_of("\"$`\\") == name.npos) {
    return "\"" + std::string(name) + "\"";
  }
  if (name.empty()) return "''";
  std::string out;
  for (size_t i = 0; i < name.size();) {
    size_t j = i;
    bool run_printable = printable(name[i]);
    while (j < name.size() && printable(name[j]) == run_printable) ++j;
    std::string_view run = name.substr(i, j - i);
    if (run_printable) {
      out += '\'';
      for (char c : run) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    } else {
      out += "$'";
      for (unsigned char c : run) {
        static const char kNamed[] = "\a\b\t\n\v\f\r";
        const char* named = c != 0 ? std::strchr(kNamed, c) : nullptr;
        if (named != nullptr && c < 0x20) {
          out += '\\';
          out += "abtnvfr"[named - kNamed];
        } else {
          char oct[5];
          std::snprintf(oct, sizeof(oct), "\\%03o", c);
          out += oct;
        }
      }
      out += '\'';
    }
    i = j;
  }
  return out;
}

namespace {

// A local failure as a status ErrnoText words as strerror(3) does.
absl::Status LocalError(int e) {
  switch (e) {
    case ENOENT:
      return absl::NotFoundError(std::strerror(e));
    case ENOTDIR:
      return absl::FailedPreconditionError("not a directory");
    case EISDIR:
      return absl::FailedPreconditionError("is a directory");
    default:
      return absl::UnknownError(std::strerror(e));
  }
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// A whole local file: mmap'd when its size is known, else read to the end (/proc files say 0).
class LocalBytes {
 public:
  absl::Status Load(const std::string& path, const struct stat& st) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return absl::PermissionDeniedError(std::strerror(errno));
    if (st.st_size > 0 && static_cast<uint64_t>(st.st_size) > TreeUpload::kMaxBatchedFile) {
      size_ = static_cast<size_t>(st.st_size);
      map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      ::close(fd);
      if (map_ == MAP_FAILED) {
        map_ = nullptr;
        return absl::InternalError(std::strerror(errno));
      }
      return absl::OkStatus();
    }
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        ::close(fd);
        return absl::InternalError(std::strerror(e));
      }
      if (n == 0) break;
      owned_.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return absl::OkStatus();
  }
  ~LocalBytes() {
    if (map_ != nullptr) ::munmap(map_, size_);
  }
  std::string_view view() const {
    return map_ != nullptr ? std::string_view(static_cast<const char*>(map_), size_) : owned_;
  }
  std::string Take() { return map_ != nullptr ? std::string(view()) : std::move(owned_); }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  std::string owned_;
};

}  // namespace

struct Copier::Source {
  enum Type { kFile, kDir, kLink, kSpecial } type = kFile;
  uint32_t mode = 0;
  int64_t mtime_ns = 0;
  uint64_t size = 0, ino = 0;
  std::string path;      // the path to read (a followed DFS link: its target)
  struct stat local {};  // a local source's stat
};

Copier::Copier(dfs::DfsClient* fs, Options o) : fs_(fs), o_(o) {
  mode_t m = ::umask(0);
  ::umask(m);
  umask_ = m;
}

Copier::~Copier() { Finish(); }

void Copier::Finish() { upload_.reset(); }

bool Copier::failed() const {
  absl::MutexLock lock(&out_mu_);
  return failed_;
}

void Copier::Fail(const std::string& message) {
  absl::MutexLock lock(&out_mu_);
  std::fflush(stdout);
  std::fprintf(stderr, "ardma-cp: %s\n", message.c_str());
  failed_ = true;
}

void Copier::Verbose(const Location& src, const Location& dst) {
  if (!o_.verbose) return;
  absl::MutexLock lock(&out_mu_);
  std::printf("%s -> %s\n", Quoted(src.display).c_str(), Quoted(dst.display).c_str());
}

uint32_t Copier::NewMode(uint32_t source_mode, bool dir) const {
  if (o_.preserve_mode) return source_mode & 07777;
  if (o_.default_modes) return (dir ? 0777 : 0666) & ~umask_;
  return source_mode & 07777 & ~umask_;
}

std::optional<FileType> Copier::Kind(const Location& l, absl::Status* why) {
  if (l.remote) {
    absl::StatusOr<dfs::Stat> st = fs_->Lookup(l.path);
    if (!st.ok()) {
      if (why != nullptr) *why = st.status();
      return std::nullopt;
    }
    return st->type;
  }
  struct stat st;
  if (::lstat(l.path.c_str(), &st) != 0) {
    if (why != nullptr) *why = LocalError(errno);
    return std::nullopt;
  }
  if (S_ISLNK(st.st_mode)) return FileType::kSymlink;
  return S_ISDIR(st.st_mode) ? FileType::kDirectory : FileType::kFile;
}

absl::StatusOr<Copier::Source> Copier::StatSource(const Location& src, bool follow) {
  Source info;
  info.path = src.path;
  if (!src.remote) {
    int rc =
        follow ? ::stat(src.path.c_str(), &info.local) : ::lstat(src.path.c_str(), &info.local);
    if (rc != 0) return absl::NotFoundError(std::strerror(errno));
    const struct stat& st = info.local;
    info.type = S_ISDIR(st.st_mode)   ? Source::kDir
                : S_ISLNK(st.st_mode) ? Source::kLink
                : S_ISREG(st.st_mode) ? Source::kFile
                                      : Source::kSpecial;
    info.mode = st.st_mode & 07777;
    info.mtime_ns = MtimeNs(st);
    info.size = static_cast<uint64_t>(st.st_size);
    info.ino = st.st_ino;
    return info;
  }
  absl::StatusOr<dfs::Stat> st = fs_->Lookup(src.path);
  if (absl::IsFailedPrecondition(st.status()) ||
      (follow && st.ok() && st->type == FileType::kSymlink)) {
    // A link on the way (the DFS never follows one) or at the end: resolve here.
    ARDMA_ASSIGN_OR_RETURN(info.path, fs_->FollowLinks(src.path, follow));
    st = fs_->Lookup(info.path);
  }
  if (!st.ok()) return st.status();
  info.type = st->type == FileType::kDirectory ? Source::kDir
              : st->type == FileType::kSymlink ? Source::kLink
                                               : Source::kFile;
  info.mode = st->mode;
  info.mtime_ns = absl::ToUnixNanos(st->mtime);
  info.size = st->size;
  info.ino = st->ino;
  return info;
}

bool Copier::MakeParents(const Location& src, const Location& dir, const std::string& rel) {
  std::vector<std::string> parts = absl::StrSplit(rel, '/', absl::SkipEmpty());
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (prefix.empty() ? "" : "/") + parts[i];
    Location to = Join(dir, prefix);
    std::optional<FileType> there = Kind(to);
    if (there == FileType::kDirectory) continue;
    if (there) {
      Fail(absl::StrCat(Quoted(to.display), " exists but is not a directory"));
      return false;
    }
    // The source's directory, for its mode (and its name in -v's line).
    Location from = src;
    size_t cut = 0;
    for (size_t n = 0; n <= i; ++n) cut = src.path.find(parts[n], cut) + parts[n].size();
    from.path = src.path.substr(0, cut);
    from.display = src.display.substr(0, src.display.size() - (src.path.size() - cut));
    absl::StatusOr<Source> info = StatSource(from, /*follow=*/true);
    uint32_t mode = NewMode(info.ok() ? info->mode : 0755, true);
    absl::Status made = to.remote                              ? fs_->Mkdir(to.path, mode).status()
                        : ::mkdir(to.path.c_str(), mode) == 0 ? absl::OkStatus()
                                                               : LocalError(errno);
    if (!made.ok()) {
      Fail(absl::StrCat("cannot make directory ", Quoted(to.display), ": ", ErrnoText(made)));
      return false;
    }
    if (!to.remote) ::chmod(to.path.c_str(), mode);  // (mkdir's mode is under the umask)
    if (o_.verbose) {
      absl::MutexLock lock(&out_mu_);
      std::printf("%s -> %s\n", from.display.c_str(), to.display.c_str());  // unquoted, as GNU's
    }
  }
  return true;
}

void Copier::CopyOperand(const Location& src, const Location& dst) {
  self_copy_ino_ = 0;
  self_copy_hit_ = false;
  Copy(src, dst, true);
}

void Copier::Copy(const Location& src, const Location& dst, bool top) {
  bool follow =
      o_.deref == Deref::kAlways ||
      (top && (o_.deref == Deref::kCommandLine || (o_.deref == Deref::kDefault && !o_.recursive)));
  absl::StatusOr<Source> info = StatSource(src, follow);
  if (!info.ok()) {
    return Fail(
        absl::StrCat("cannot stat ", Quoted(src.display), ": ",
                     src.remote ? ErrnoText(info.status()) : std::string(info.status().message())));
  }
  if (info->type == Source::kDir) {
    if (!o_.recursive) {
      return Fail(absl::StrCat("-r not specified; omitting directory ", Quoted(src.display)));
    }
    return CopyDir(src, dst, *info);
  }
  if (info->type == Source::kSpecial) {
    return Fail(absl::StrCat("cannot copy special file ", Quoted(src.display),
                             ": the file system holds no FIFOs, sockets or devices"));
  }
  if (upload_ != nullptr && !src.remote && dst.remote) {  // inside a tree upload
    if (info->type == Source::kLink) {
      char target[4097];
      ssize_t n = ::readlink(src.path.c_str(), target, sizeof(target) - 1);
      if (n <= 0) return Fail(absl::StrCat("cannot read symbolic link ", Quoted(src.display)));
      return upload_->Add(dfs::BatchKind::kSymlink, o_.no_clobber ? dfs::kBatchKeepExisting : 0,
                          0777, 0, dst, std::string(target, static_cast<size_t>(n)), src.display);
    }
    if (info->size <= TreeUpload::kMaxBatchedFile) {
      LocalBytes bytes;
      if (absl::Status s = bytes.Load(src.path, info->local); !s.ok()) {
        return Fail(
            absl::StrCat("cannot open ", Quoted(src.display), " for reading: ", s.message()));
      }
      if (bytes.view().size() <= TreeUpload::kMaxBatchedFile) {
        uint8_t flags = (o_.no_clobber ? dfs::kBatchKeepExisting : 0) |
                        (o_.update ? dfs::kBatchKeepNewer : 0) |
                        (o_.preserve_mode ? dfs::kBatchSetMode : 0) |
                        (o_.preserve_timestamps ? dfs::kBatchSetMtime : 0);
        return upload_->Add(dfs::BatchKind::kPut, flags, NewMode(info->mode),
                            static_cast<uint64_t>(info->mtime_ns), dst, bytes.Take(), src.display);
      }
    }
    upload_->Drain();  // a big file streams; the batches before it must have landed
  }
  absl::Status missing;
  std::optional<FileType> target = Kind(dst, &missing);
  if (!target && dfs::ErrnoOf(missing) == ENOTDIR) {  // a file on the way
    return Fail(absl::StrCat("cannot stat ", Quoted(dst.display), ": ", ErrnoText(missing)));
  }
  Location out = dst;  // where the bytes go
  if (target == FileType::kSymlink && info->type != Source::kLink) {
    // cp writes through a link to a file, and never through a dangling one.
    std::optional<FileType> through;
    if (dst.remote) {
      absl::StatusOr<std::string> real = fs_->FollowLinks(dst.path);
      if (real.ok()) {
        out.path = *real;
        through = Kind(out);
      }
    } else if (struct stat st; ::stat(dst.path.c_str(), &st) == 0) {
      through = S_ISDIR(st.st_mode) ? FileType::kDirectory : FileType::kFile;
    }
    if (!through) {
      return Fail(absl::StrCat("not writing through dangling symlink ", Quoted(dst.display)));
    }
    target = through;
  }
  if (target == FileType::kDirectory) {
    return Fail(
        absl::StrCat("cannot overwrite directory ", Quoted(dst.display), " with non-directory"));
  }
  if (target && src.remote && dst.remote) {
    absl::StatusOr<dfs::Stat> d = fs_->Lookup(out.path);
    if (d.ok() && d->ino == info->ino) {
      return Fail(
          absl::StrCat(Quoted(src.display), " and ", Quoted(dst.display), " are the same file"));
    }
  }
  if (target && o_.no_clobber) return;
  if (target == FileType::kFile && o_.update && info->type == Source::kFile) {
    // -u: only over an older file (times to the nanosecond, as both sides keep them).
    int64_t dst_ns = 0;
    if (out.remote) {
      absl::StatusOr<dfs::Stat> d = fs_->Lookup(out.path);
      if (d.ok()) dst_ns = absl::ToUnixNanos(d->mtime);
    } else if (struct stat st; ::stat(out.path.c_str(), &st) == 0) {
      dst_ns = MtimeNs(st);
    }
    if (dst_ns >= info->mtime_ns) return;
  }
  if (info->type == Source::kLink) return CopyLink(src, dst);
  absl::Status s = CopyFile(src, out, *info, target.has_value());
  if (!s.ok()) {
    int e = dfs::ErrnoOf(s);
    if (!target && (e == ENOENT || e == ENOTDIR)) {  // no place to create it
      return Fail(
          absl::StrCat("cannot create regular file ", Quoted(dst.display), ": ", ErrnoText(s)));
    }
    return Fail(absl::StrCat("cannot copy ", Quoted(src.display), " to ", Quoted(dst.display), ": ",
                             ErrnoText(s)));
  }
  Verbose(src, dst);
}

void Copier::CopyLink(const Location& src, const Location& dst) {
  std::string target;
  if (src.remote) {
    absl::StatusOr<std::string> t = fs_->Readlink(src.path);
    if (!t.ok()) return Fail(absl::StrCat("cannot read symbolic link ", Quoted(src.display)));
    target = *t;
  } else {
    char buf[4097];
    ssize_t n = ::readlink(src.path.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) return Fail(absl::StrCat("cannot read symbolic link ", Quoted(src.display)));
    target.assign(buf, static_cast<size_t>(n));
  }
  absl::Status s;
  if (dst.remote) {
    std::vector<dfs::BatchOp> op = {{dfs::BatchKind::kSymlink, 0, 0777, 0, dst.path, target}};
    absl::StatusOr<std::vector<absl::Status>> r = fs_->Batch(op);
    s = r.ok() ? (*r)[0] : r.status();
  } else {
    ::unlink(dst.path.c_str());  // a non-directory there is replaced, as cp does
    if (::symlink(target.c_str(), dst.path.c_str()) != 0) {
      s = absl::InternalError(std::strerror(errno));
    }
  }
  if (!s.ok()) {
    return Fail(absl::StrCat("cannot create symbolic link ", Quoted(dst.display), ": ",
                             dst.remote ? ErrnoText(s) : std::string(s.message())));
  }
  Verbose(src, dst);
}

void Copier::Progress(const std::string& name, uint64_t done, uint64_t total) {
  if (!o_.progress || !isatty(STDERR_FILENO) || total == 0) return;
  int width = 30;
  int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "\r%-30.30s [%s%s] %3d%% ", name.c_str(), std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), static_cast<int>(100 * done / total));
  if (done >= total) std::fprintf(stderr, "\n");
}

absl::Status Copier::CopyFile(const Location& src, const Location& dst, const Source& info,
                              bool exists) {
  if (src.remote && dst.remote) {
    // The copy of a new file has the source's mode; an existing file keeps its own.
    ARDMA_ASSIGN_OR_RETURN(dfs::Stat now, fs_->Copy(info.path, dst.path));
    uint32_t mode = o_.preserve_mode ? info.mode : exists ? now.mode : NewMode(info.mode);
    if (mode == now.mode && !o_.preserve_timestamps) return absl::OkStatus();
    return fs_->SetAttributes(
        dst.path, mode,
        o_.preserve_timestamps ? absl::FromUnixNanos(info.mtime_ns) : absl::InfinitePast());
  }
  if (!src.remote && dst.remote) return Upload(src, dst, info);
  if (src.remote && !dst.remote) return Download(src, dst, info);
  return absl::InvalidArgumentError("both are local: use cp");
}

absl::Status Copier::Upload(const Location& src, const Location& dst, const Source& info) {
  LocalBytes bytes;
  ARDMA_RETURN_IF_ERROR(bytes.Load(src.path, info.local));
  std::string_view data = bytes.view();
  ARDMA_RETURN_IF_ERROR(fs_->Upload(dst.path, data, NewMode(info.mode), [&](uint64_t done) {
    Progress(src.display, done, data.size());
  }));
  if (o_.preserve_mode || o_.preserve_timestamps) {
    ARDMA_ASSIGN_OR_RETURN(dfs::Stat now, fs_->Lookup(dst.path));
    ARDMA_RETURN_IF_ERROR(fs_->SetAttributes(
        dst.path, o_.preserve_mode ? info.mode : now.mode,
        o_.preserve_timestamps ? absl::FromUnixNanos(info.mtime_ns) : absl::InfinitePast()));
  }
  return absl::OkStatus();
}

absl::Status Copier::Download(const Location& src, const Location& dst, const Source& info) {
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  mode_t mode = o_.default_modes ? 0666 : info.mode & 07777;  // (less the umask)
  int fd = ::open(dst.path.c_str(), flags, mode);
  if (fd < 0 && o_.force && errno != ENOENT && errno != ENOTDIR) {
    ::unlink(dst.path.c_str());  // -f: remove what cannot be opened, then try again
    fd = ::open(dst.path.c_str(), flags, mode);
  }
  if (fd < 0) return LocalError(errno);
  absl::StatusOr<uint64_t> size = fs_->Download(
      info.path,
      [fd](uint64_t offset, std::string_view bytes) -> absl::Status {
        for (size_t done = 0; done < bytes.size();) {
          ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                               static_cast<off_t>(offset + done));
          if (n < 0) return absl::InternalError(std::strerror(errno));
          done += static_cast<size_t>(n);
        }
        return absl::OkStatus();
      },
      [&](uint64_t done) { Progress(src.display, done, info.size); });
  if (size.ok() && o_.preserve_mode) ::fchmod(fd, info.mode & 07777);
  if (size.ok() && o_.preserve_timestamps) {
    timespec times[2];
    times[0].tv_sec = times[1].tv_sec = info.mtime_ns / 1000000000;
    times[0].tv_nsec = times[1].tv_nsec = info.mtime_ns % 1000000000;
    ::futimens(fd, times);
  }
  ::close(fd);
  return size.status();
}

void Copier::CopyDir(const Location& src, const Location& dst, const Source& info) {
  if (src.remote && self_copy_ino_ != 0 && info.ino == self_copy_ino_) {
    self_copy_hit_ = true;
    return Fail(self_copy_message_);  // the destination itself, met in its source
  }
  // Below a directory this upload made, nothing can be in the way: no need to look.
  std::optional<FileType> target = fresh_ ? std::nullopt : Kind(dst);
  if (target && target != FileType::kDirectory) {
    return Fail(absl::StrCat("cannot overwrite non-directory ", Quoted(dst.display),
                             " with directory ", Quoted(src.display)));
  }
  if (src.remote && dst.remote && o_.deref != Deref::kAlways && !o_.default_modes &&
      self_copy_ino_ == 0) {
    // The whole tree, on the server, in one request.
    absl::StatusOr<std::pair<uint64_t, uint64_t>> copied = fs_->CopyTree(
        info.path, dst.path, o_.no_clobber, o_.preserve_mode || o_.preserve_timestamps, umask_);
    if (copied.ok()) {
      if (o_.verbose) {  // one line per entry, as cp prints them
        std::string cursor;
        for (;;) {
          absl::StatusOr<dfs::FindPage> page = fs_->Find(info.path, cursor);
          if (!page.ok()) break;
          for (const dfs::FoundEntry& e : page->entries) {
            std::string rest = e.path.substr(std::min(e.path.size(), info.path.size()));
            Verbose(ParseLocation(src.display + rest), ParseLocation(dst.display + rest));
          }
          if (page->done) break;
          cursor = page->next;
        }
      }
      return;
    }
    int e = dfs::ErrnoOf(copied.status());
    if (!target && (e == ENOENT || e == ENOTDIR)) {  // no place to make it
      return Fail(absl::StrCat("cannot create directory ", Quoted(dst.display), ": ",
                               ErrnoText(copied.status())));
    }
    if (!absl::StrContains(copied.status().message(), "into itself")) {
      return Fail(
          absl::StrCat("cannot copy ", Quoted(src.display), ": ", copied.status().message()));
    }
    // As GNU cp: the rest is copied entry by entry below, and the destination, met in the
    // source, is refused then.
    self_copy_message_ = absl::StrCat("cannot copy a directory, ", Quoted(src.display),
                                      ", into itself, ", Quoted(dst.display));
    self_copy_pending_ = true;
  }
  if (!src.remote && dst.remote) return UploadTree(src, dst, info, !target.has_value());
  if (!target) {
    uint32_t mode = NewMode(info.mode, true) | 0700;
    absl::Status made = dst.remote ? fs_->Mkdir(dst.path, mode).status()
                        : ::mkdir(dst.path.c_str(), mode) == 0 ? absl::OkStatus()
                                                               : LocalError(errno);
    if (!made.ok()) {
      return Fail(
          absl::StrCat("cannot create directory ", Quoted(dst.display), ": ", ErrnoText(made)));
    }
  }
  if (self_copy_pending_) {
    self_copy_pending_ = false;
    absl::StatusOr<dfs::Stat> made = fs_->Lookup(dst.path);
    if (!made.ok()) return Fail(absl::StrCat("cannot access ", Quoted(dst.display)));
    self_copy_ino_ = made->ino;
  }
  Verbose(src, dst);
  std::vector<std::string> names;
  absl::StatusOr<std::vector<dfs::DirEntry>> list = fs_->ListDir(info.path);
  if (!list.ok()) return Fail(absl::StrCat("cannot access ", Quoted(src.display)));
  for (const auto& e : *list) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  Location from = src;
  from.path = info.path;
  for (const std::string& name : names) {
    Location child = Join(from, name);
    child.display = Join(src, name).display;
    Copy(child, Join(dst, name), false);
    if (self_copy_hit_) break;  // as GNU cp: the rest of every directory around it is left
  }
  // Modes and times last: the contents' copies changed them. A new directory drops the owner
  // bits it was made with to let the copy in.
  if (dst.remote) {
    if (!target || o_.preserve_mode || o_.preserve_timestamps) {
      fs_->SetAttributes(
             dst.path, NewMode(info.mode, true),
             o_.preserve_timestamps ? absl::FromUnixNanos(info.mtime_ns) : absl::InfinitePast())
          .IgnoreError();
    }
    return;
  }
  if (!target || o_.preserve_mode) ::chmod(dst.path.c_str(), NewMode(info.mode, true));
  if (o_.preserve_timestamps) {
    timespec times[2];
    times[0].tv_sec = times[1].tv_sec = info.mtime_ns / 1000000000;
    times[0].tv_nsec = times[1].tv_nsec = info.mtime_ns % 1000000000;
    ::utimensat(AT_FDCWD, dst.path.c_str(), times, 0);
  }
}

// A local directory into the DFS: every change goes through the batches, in walk order; the
// directory's own attributes follow its contents.
void Copier::UploadTree(const Location& src, const Location& dst, const Source& info, bool fresh) {
  bool outermost = upload_ == nullptr;
  bool was_fresh = fresh_;
  fresh_ = fresh;
  if (outermost) upload_ = std::make_unique<TreeUpload>(fs_, this, o_.verbose);
  upload_->Add(dfs::BatchKind::kMkdir, 0, NewMode(info.mode, true) | 0700, 0, dst, "", src.display);
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(src.path, ec)) {
    names.push_back(e.path().filename().string());
  }
  if (ec) Fail(absl::StrCat("cannot access ", Quoted(src.display), ": ", ec.message()));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) Copy(Join(src, name), Join(dst, name), false);
  // A new directory loses the owner bits it was made with; an existing one keeps its mode.
  uint8_t flags = (fresh || o_.preserve_mode ? dfs::kBatchSetMode : 0) |
                  (o_.preserve_timestamps ? dfs::kBatchSetMtime : 0);
  if (flags != 0) {
    upload_->Add(dfs::BatchKind::kSetAttr, flags, NewMode(info.mode, true),
                 static_cast<uint64_t>(info.mtime_ns), dst, "", src.display);
  }
  fresh_ = was_fresh;
  if (outermost) upload_.reset();  // drains and reports
}

}  // namespace ardma::cp
