// `ardma fs ...`: the file system for people at a shell.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"
#include "tools/ardma_cli.h"

namespace ardma::cli {
namespace {

std::string TypeName(dfs::FileType t) {
  switch (t) {
    case dfs::FileType::kDirectory: return "directory";
    case dfs::FileType::kSymlink: return "symbolic link";
    default: return "file";
  }
}

char TypeLetter(dfs::FileType t) {
  switch (t) {
    case dfs::FileType::kDirectory: return 'd';
    case dfs::FileType::kSymlink: return 'l';
    default: return '-';
  }
}

// A long listing line; a symbolic link's name is followed by " -> target", as ls -l does.
std::string LongLine(dfs::DfsClient& fs, const dfs::Stat& st, std::string_view name,
                     std::string_view path) {
  std::string line = absl::StrFormat(
      "%c%04o %12d %s %s", TypeLetter(st.type), st.mode, st.size,
      absl::FormatTime("%Y-%m-%d %H:%M:%S", st.mtime, absl::LocalTimeZone()), std::string(name));
  if (st.type == dfs::FileType::kSymlink) {
    absl::StatusOr<std::string> target = fs.Readlink(path);
    if (target.ok()) absl::StrAppend(&line, " -> ", *target);
  }
  return line;
}

// The file's bytes; a path through symbolic links is followed, as cat(1) follows them.
absl::StatusOr<std::string> ReadFollowing(dfs::DfsClient& fs, const std::string& path) {
  absl::StatusOr<std::string> data = fs.ReadFile(path);
  if (!absl::IsFailedPrecondition(data.status())) return data;
  absl::StatusOr<std::string> real = fs.FollowLinks(path);
  if (!real.ok() || *real == path) return data.status();
  return fs.ReadFile(*real);
}

absl::Status WholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunFsCommand(const Options& opt, const std::vector<std::string>& args) {
  if (args.size() < 2) {
    return Usage("usage: ardma fs ls|cat|put|get|mkdir|rm|mv|ln|readlink|stat|df ...");
  }
  const std::string& cmd = args[1];
  std::vector<std::string> operands(args.begin() + 2, args.end());
  auto need = [&](size_t min, size_t max, const char* usage) -> absl::Status {
    if (operands.size() < min || operands.size() > max) {
      return Usage(absl::StrCat("usage: ardma fs ", usage));
    }
    return absl::OkStatus();
  };
  static const std::vector<std::string> kFsCommands = {
      "ls", "cat", "put", "get", "mkdir", "rm", "mv", "ln", "readlink", "stat", "df"};
  if (std::find(kFsCommands.begin(), kFsCommands.end(), cmd) == kFsCommands.end()) {
    return Usage(absl::StrCat("unknown fs command '", cmd, "' (see --help)"));
  }
  if (cmd == "ls") {
    ARDMA_RETURN_IF_ERROR(need(0, 1000, "ls [-l] [PATH...]"));
    if (operands.empty()) operands.push_back("/");  // as ls lists "."
  }
  if (cmd == "cat") ARDMA_RETURN_IF_ERROR(need(1, 1000, "cat PATH..."));
  if (cmd == "put") ARDMA_RETURN_IF_ERROR(need(2, 2, "put LOCAL PATH"));
  if (cmd == "get") ARDMA_RETURN_IF_ERROR(need(2, 2, "get PATH LOCAL"));
  if (cmd == "mkdir") ARDMA_RETURN_IF_ERROR(need(1, 1000, "mkdir [-p] PATH..."));
  if (cmd == "rm") ARDMA_RETURN_IF_ERROR(need(1, 1000, "rm [-r] PATH..."));
  if (cmd == "mv") ARDMA_RETURN_IF_ERROR(need(2, 2, "mv FROM TO"));
  if (cmd == "ln") {
    ARDMA_RETURN_IF_ERROR(need(2, 2, "ln -s TARGET PATH"));
    if (!opt.symbolic) return Usage("ardma fs ln: the DFS has no hard links; use -s");
  }
  if (cmd == "readlink") ARDMA_RETURN_IF_ERROR(need(1, 1000, "readlink PATH..."));
  if (cmd == "stat") ARDMA_RETURN_IF_ERROR(need(1, 1000, "stat PATH..."));
  if (cmd == "df") ARDMA_RETURN_IF_ERROR(need(0, 0, "df"));
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<Servers> servers, ConnectServices(opt));
  dfs::DfsClient fs(servers.get(), opt.mode, opt.fs);
  if (cmd == "ls") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, fs.Lookup(path));
      if (st.type != dfs::FileType::kDirectory) {
        std::printf("%s\n", opt.long_list ? LongLine(fs, st, path, path).c_str() : path.c_str());
        continue;
      }
      if (operands.size() > 1) std::printf("%s:\n", path.c_str());
      ARDMA_ASSIGN_OR_RETURN(std::vector<dfs::DirEntry> entries, fs.ListDir(path));
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.name < b.name; });
      for (const auto& e : entries) {
        if (!opt.long_list) {
          std::printf("%s\n", e.name.c_str());
          continue;
        }
        std::string child = path == "/" ? "/" + e.name : path + "/" + e.name;
        absl::StatusOr<dfs::Stat> cst = fs.Lookup(child);
        if (cst.ok()) std::printf("%s\n", LongLine(fs, *cst, e.name, child).c_str());
      }
    }
    return absl::OkStatus();
  }
  if (cmd == "cat") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(std::string data, ReadFollowing(fs, path));
      std::fwrite(data.data(), 1, data.size(), stdout);
    }
    return absl::OkStatus();
  }
  if (cmd == "put") {
    std::string data;
    ARDMA_RETURN_IF_ERROR(WholeFile(operands[0], &data));
    return fs.WriteFile(operands[1], data);
  }
  if (cmd == "get") {
    ARDMA_ASSIGN_OR_RETURN(std::string data, ReadFollowing(fs, operands[0]));
    std::ofstream out(operands[1], std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", operands[1]));
    return absl::OkStatus();
  }
  if (cmd == "mkdir") {
    for (const std::string& path : operands) {
      if (!opt.parents) {
        ARDMA_RETURN_IF_ERROR(fs.Mkdir(path).status());
        continue;
      }
      ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, dfs::SplitPath(path));
      std::string prefix;
      for (std::string_view part : parts) {
        prefix += "/";
        prefix += part;
        absl::Status s = fs.Mkdir(prefix).status();
        if (!s.ok() && !absl::IsAlreadyExists(s)) return s;
      }
    }
    return absl::OkStatus();
  }
  if (cmd == "rm") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, fs.Lookup(path));
      if (st.type != dfs::FileType::kDirectory) {
        ARDMA_RETURN_IF_ERROR(fs.Unlink(path));
        continue;
      }
      if (!opt.recursive) {
        return absl::FailedPreconditionError(absl::StrCat(path, " is a directory (use -r)"));
      }
      // Everything below, deepest last in find's order: remove in reverse.
      std::vector<dfs::FoundEntry> all;
      std::string cursor;
      for (;;) {
        ARDMA_ASSIGN_OR_RETURN(dfs::FindPage page, fs.Find(path, cursor));
        for (auto& e : page.entries) all.push_back(std::move(e));
        if (page.done) break;
        cursor = page.next;
      }
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        ARDMA_RETURN_IF_ERROR(it->type == dfs::FileType::kDirectory ? fs.Rmdir(it->path)
                                                                    : fs.Unlink(it->path));
      }
    }
    return absl::OkStatus();
  }
  if (cmd == "mv") return fs.Rename(operands[0], operands[1]);
  if (cmd == "ln") return fs.Symlink(operands[0], operands[1]).status();
  if (cmd == "readlink") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(std::string target, fs.Readlink(path));
      std::printf("%s\n", target.c_str());
    }
    return absl::OkStatus();
  }
  if (cmd == "stat") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(dfs::Stat st, fs.Lookup(path));
      // A directory's size is its number of entries (docs/dfs.md), not bytes.
      std::string size = absl::StrCat(st.size, st.type == dfs::FileType::kDirectory
                                                   ? (st.size == 1 ? " entry" : " entries")
                                                   : (st.size == 1 ? " byte" : " bytes"));
      std::printf("%s: %s, %s, mode %04o, inode %llu\n  modified %s\n  changed  %s\n",
                  path.c_str(), TypeName(st.type).c_str(), size.c_str(),
                  st.mode, static_cast<unsigned long long>(st.ino),
                  absl::FormatTime(st.mtime, absl::LocalTimeZone()).c_str(),
                  absl::FormatTime(st.ctime, absl::LocalTimeZone()).c_str());
      // On a cluster: which member holds a file's bytes (its data slot's owner, docs/dfs.md).
      if (auto* routed = dynamic_cast<cluster::Cluster*>(servers.get());
          routed != nullptr && st.type == dfs::FileType::kFile) {
        std::printf("  bytes on member %s\n",
                    routed->map()->Owner(dfs::DataSlot(opt.fs, st.ino)).c_str());
      }
    }
    return absl::OkStatus();
  }
  // df
  ARDMA_ASSIGN_OR_RETURN(dfs::Usage u, fs.GetUsage());
  // (A data block holds up to kBlockSize bytes: a small file's is just big enough for it.)
  std::printf(
      "file system %s: %llu files, %llu directories, %llu data blocks of up to %llu bytes; "
      "heap in use %llu bytes\n",
      opt.fs.c_str(), static_cast<unsigned long long>(u.files),
      static_cast<unsigned long long>(u.directories),
      static_cast<unsigned long long>(u.data_blocks),
      static_cast<unsigned long long>(dfs::kBlockSize),
      static_cast<unsigned long long>(u.heap_allocated));
  if (u.orphans > 0) {
    std::printf("%llu removed files' bytes wait for a member that was down to free them\n",
                static_cast<unsigned long long>(u.orphans));
  }
  return absl::OkStatus();
}

}  // namespace ardma::cli
