#include "apps/cp/cp_cli.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/client/client.h"
#include "core/host_port.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"

namespace ardma::cp {

const char kUsage[] =
    "Usage: ardma-cp [OPTION]... SOURCE DEST\n"
    "  or:  ardma-cp [OPTION]... SOURCE... DIRECTORY\n"
    "Copy files and directories, like cp(1); dfs:/PATH names a file in an ardmad's file system,\n"
    "anything else a local file. DFS to DFS copies run on the server in one request (a whole\n"
    "tree with -r); uploads and downloads stream pipelined requests.\n"
    "\n"
    "  -r, -R, --recursive  copy directories recursively; inside a local tree, symbolic links to\n"
    "                       directories are reported and not followed, links to files are\n"
    "                       copied as the file (the file system has no symbolic links)\n"
    "  -n, --no-clobber     do not overwrite an existing file\n"
    "  -p                   preserve mode and modification time\n"
    "  -v, --verbose        explain what is being done\n"
    "      --progress       show a progress bar on standard error (when it is a terminal)\n"
    "      --server=HOST:PORT  the ardmad ($ARDMA_SERVER, else 127.0.0.1:15712)\n"
    "      --auth-file=FILE    authenticate as FILE's NAME SECRET (default $ARDMA_AUTH_FILE)\n"
    "      --fs=NAME        the file system (default: default)\n"
    "      --help           show this help\n"
    "      --version        print the version and commit\n"
    "Exit status: 0 if everything was copied, 1 if anything failed (the rest is still copied).";

namespace {

namespace fsys = std::filesystem;
using dfs::DfsClient;
using dfs::FileType;

struct Location {
  bool remote = false;
  std::string path;     // DFS path or local path
  std::string display;  // as the user wrote it
};

Location Parse(const std::string& arg) {
  if (arg.rfind("dfs:", 0) == 0) return {true, arg.substr(4), arg};
  return {false, arg, arg};
}

std::string Join(const Location& dir, const std::string& name) {
  std::string sep = !dir.path.empty() && dir.path.back() == '/' ? "" : "/";
  return (dir.remote ? "dfs:" : "") + dir.path + sep + name;
}

std::string Basename(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

class Copier {
 public:
  Copier(DfsClient* fs, Options o) : fs_(fs), o_(o) {}

  // Kind of a location: nullopt if it does not exist.
  std::optional<FileType> Kind(const Location& l) {
    if (l.remote) {
      absl::StatusOr<dfs::Stat> st = fs_->Lookup(l.path);
      if (!st.ok()) return std::nullopt;
      return st->type;
    }
    struct stat st;
    if (::stat(l.path.c_str(), &st) != 0) return std::nullopt;
    return S_ISDIR(st.st_mode) ? FileType::kDirectory : FileType::kFile;
  }

  // Copies `src` to exactly `dst`. Errors are reported and remembered; copying goes on.
  void Copy(const Location& src, const Location& dst) {
    std::optional<FileType> kind = Kind(src);
    if (!kind) {
      return Fail(absl::StrCat("cannot stat '", src.display, "': No such file or directory"));
    }
    if (!src.remote) {
      // The file system holds regular files and directories only: a FIFO would block the copy
      // forever, a device or socket has no contents to copy.
      struct stat st;
      if (::stat(src.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        return Fail(absl::StrCat("cannot copy special file '", src.display,
                                 "': the file system holds only regular files and directories"));
      }
    }
    if (*kind == FileType::kDirectory) {
      if (!o_.recursive) {
        return Fail(absl::StrCat("-r not specified; omitting directory '", src.display, "'"));
      }
      return CopyDir(src, dst);
    }
    std::optional<FileType> target = Kind(dst);
    if (target == FileType::kDirectory) {
      return Fail(
          absl::StrCat("cannot overwrite directory '", dst.display, "' with non-directory"));
    }
    if (target && o_.no_clobber) return;
    absl::Status s = CopyFile(src, dst);
    if (!s.ok())
      return Fail(
          absl::StrCat("cannot copy '", src.display, "' to '", dst.display, "': ", s.message()));
    if (o_.verbose) std::printf("'%s' -> '%s'\n", src.display.c_str(), dst.display.c_str());
  }

  bool failed() const { return failed_; }

 private:
  void Fail(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "ardma-cp: %s\n", message.c_str());
    failed_ = true;
  }

  void Progress(const std::string& name, uint64_t done, uint64_t total) {
    if (!o_.progress || !isatty(STDERR_FILENO) || total == 0) return;
    int width = 30;
    int filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r%-30.30s [%s%s] %3d%% ", name.c_str(), std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), static_cast<int>(100 * done / total));
    if (done >= total) std::fprintf(stderr, "\n");
  }

  absl::Status CopyFile(const Location& src, const Location& dst) {
    if (src.remote && dst.remote) {
      ARDMA_RETURN_IF_ERROR(fs_->Copy(src.path, dst.path).status());
      if (o_.preserve) {
        ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, fs_->Lookup(src.path));
        ARDMA_RETURN_IF_ERROR(fs_->SetAttributes(dst.path, st.mode, st.mtime));
      }
      return absl::OkStatus();
    }
    if (!src.remote && dst.remote) return Upload(src, dst);
    if (src.remote && !dst.remote) return Download(src, dst);
    return absl::InvalidArgumentError("both are local: use cp");
  }

  absl::Status Upload(const Location& src, const Location& dst) {
    int fd = ::open(src.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(std::strerror(errno));
    struct stat st;
    ::fstat(fd, &st);
    uint64_t size = static_cast<uint64_t>(st.st_size);
    void* map = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
    ::close(fd);
    if (map == MAP_FAILED) return absl::InternalError(std::strerror(errno));
    std::string_view data(static_cast<const char*>(map), size);
    absl::Status s = fs_->Upload(dst.path, data, st.st_mode & 07777,
                                 [&](uint64_t done) { Progress(src.display, done, size); });
    if (map != nullptr) ::munmap(map, size);
    if (s.ok() && o_.preserve) {
      s = fs_->SetAttributes(
          dst.path, st.st_mode & 07777,
          absl::FromUnixNanos(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                              st.st_mtim.tv_nsec));
    }
    return s;
  }

  absl::Status Download(const Location& src, const Location& dst) {
    ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, fs_->Lookup(src.path));
    int fd = ::open(dst.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.mode & 07777);
    if (fd < 0) return absl::PermissionDeniedError(std::strerror(errno));
    absl::StatusOr<uint64_t> size = fs_->Download(
        src.path,
        [fd](uint64_t offset, std::string_view bytes) -> absl::Status {
          for (size_t done = 0; done < bytes.size();) {
            ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                                 static_cast<off_t>(offset + done));
            if (n < 0) return absl::InternalError(std::strerror(errno));
            done += static_cast<size_t>(n);
          }
          return absl::OkStatus();
        },
        [&](uint64_t done) { Progress(src.display, done, st.size); });
    if (o_.preserve && size.ok()) {
      ::fchmod(fd, st.mode & 07777);
      timespec times[2];
      int64_t ns = absl::ToUnixNanos(st.mtime);
      times[0].tv_sec = times[1].tv_sec = ns / 1000000000;
      times[0].tv_nsec = times[1].tv_nsec = ns % 1000000000;
      ::futimens(fd, times);
    }
    ::close(fd);
    return size.status();
  }

  void CopyDir(const Location& src, const Location& dst) {
    if (src.remote && dst.remote) {  // the whole tree, on the server, in one request
      absl::StatusOr<std::pair<uint64_t, uint64_t>> copied =
          fs_->CopyTree(src.path, dst.path, o_.no_clobber, o_.preserve);
      if (!copied.ok()) {
        return Fail(absl::StrCat("cannot copy '", src.display, "': ", copied.status().message()));
      }
      if (o_.verbose) std::printf("'%s' -> '%s'\n", src.display.c_str(), dst.display.c_str());
      return;
    }
    // Across the network: make the directory, then copy its entries one by one.
    std::optional<FileType> target = Kind(dst);
    if (target == FileType::kFile) {
      return Fail(absl::StrCat("cannot overwrite non-directory '", dst.display,
                               "' with directory '", src.display, "'"));
    }
    if (!target) {
      absl::Status made =
          dst.remote ? fs_->Mkdir(dst.path).status()
                     : (fsys::create_directory(dst.path) ? absl::OkStatus()
                                                         : absl::InternalError("mkdir failed"));
      if (!made.ok()) {
        return Fail(absl::StrCat("cannot create directory '", dst.display, "': ", made.message()));
      }
      if (o_.verbose) std::printf("'%s' -> '%s'\n", src.display.c_str(), dst.display.c_str());
    }
    std::vector<std::string> names;
    if (src.remote) {
      absl::StatusOr<std::vector<dfs::DirEntry>> list = fs_->ListDir(src.path);
      if (!list.ok()) return Fail(absl::StrCat("cannot read '", src.display, "'"));
      for (const auto& e : *list) names.push_back(e.name);
    } else {
      std::error_code ec;
      for (const auto& e : fsys::directory_iterator(src.path, ec)) {
        std::string name = e.path().filename().string();
        std::error_code link_ec;
        if (e.is_symlink(link_ec) && fsys::is_directory(e.path(), link_ec)) {
          // Not followed: a link like `up -> ..` would copy the tree into itself forever.
          Fail(absl::StrCat("not following symbolic link to a directory '",
                            Join(src, name), "' (the file system has no symbolic links)"));
          continue;
        }
        names.push_back(std::move(name));
      }
      if (ec) return Fail(absl::StrCat("cannot read '", src.display, "': ", ec.message()));
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      Copy(Parse(Join(src, name)), Parse(Join(dst, name)));
    }
  }

  DfsClient* fs_;
  Options o_;
  bool failed_ = false;
};

}  // namespace

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  Command c;
  Options& o = c.options;
  std::vector<std::string>& operands = c.operands;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (options_done || a.empty() || a[0] != '-' || a == "-") {
      operands.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
    } else if (a == "--help") {
      c.help = true;
      return c;
    } else if (a == "--version") {
      c.version = true;
      return c;
    } else if (a == "--recursive") {
      o.recursive = true;
    } else if (a == "--no-clobber") {
      o.no_clobber = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--progress") {
      o.progress = true;
    } else if (a.rfind("--server=", 0) == 0) {
      c.server = a.substr(9);
    } else if (a.rfind("--auth-file=", 0) == 0) {
      c.auth_file = a.substr(12);
    } else if (a.rfind("--fs=", 0) == 0) {
      c.fs = a.substr(5);
    } else if (a == "--server" || a == "--fs" || a == "--auth-file") {  // GNU: value follows
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("option '", a, "' requires an argument"));
      }
      (a == "--server" ? c.server : a == "--fs" ? c.fs : c.auth_file) = argv[++i];
    } else if (a.size() > 1 && a[1] != '-') {
      for (char ch : a.substr(1)) {
        switch (ch) {
          case 'r':
          case 'R':
            o.recursive = true;
            break;
          case 'n':
            o.no_clobber = true;
            break;
          case 'p':
            o.preserve = true;
            break;
          case 'v':
            o.verbose = true;
            break;
          default:
            return absl::InvalidArgumentError(
                absl::StrCat("invalid option -- '", std::string(1, ch), "'"));
        }
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unrecognized option '", a, "'"));
    }
  }
  if (operands.size() < 2) {
    return absl::InvalidArgumentError(
        operands.empty() ? "missing file operand"
                         : "missing destination file operand after '" + operands[0] + "'");
  }
  return c;
}

int RunCommand(const Command& c) {
  absl::StatusOr<ClientOptions> options = OptionsWithAuthFile(c.auth_file);
  absl::StatusOr<std::unique_ptr<Client>> client =
      options.ok() ? Client::Connect(c.server, *options) : options.status();
  if (!client.ok()) {
    std::cerr << "ardma-cp: " << client.status().message() << "\n";
    return 1;
  }
  DfsClient fs(client->get(), Mode::kActive, c.fs);
  Copier copier(&fs, c.options);
  Location dest = Parse(c.operands.back());
  bool dest_is_dir = copier.Kind(dest) == FileType::kDirectory;
  if (c.operands.size() > 2 && !dest_is_dir) {
    std::cerr << "ardma-cp: target '" << dest.display << "' is not a directory\n";
    return 1;
  }
  for (size_t i = 0; i + 1 < c.operands.size(); ++i) {
    Location src = Parse(c.operands[i]);
    if (!src.remote && !dest.remote) {
      std::cerr << "ardma-cp: '" << src.display << "' and '" << dest.display
                << "' are both local: use cp\n";
      return 1;
    }
    Location target = dest_is_dir ? Parse(Join(dest, Basename(src.path))) : dest;
    copier.Copy(src, target);
  }
  std::fflush(stdout);
  return copier.failed() ? 1 : 0;
}

}  // namespace ardma::cp
