#include "apps/cp/cp_cli.h"

#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/cli/flag_set.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/host_port.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"

namespace ardma::cp {

using dfs::DfsClient;
using dfs::FileType;

namespace {

constexpr char kUsage[] =
    "Usage: ardma-cp [OPTION]... [-T] SOURCE DEST\n"
    "  or:  ardma-cp [OPTION]... SOURCE... DIRECTORY\n"
    "  or:  ardma-cp [OPTION]... -t DIRECTORY SOURCE...\n"
    "Copy files and directories, like cp(1); dfs:/PATH names a file in an ardmad's file system,\n"
    "anything else a local file. DFS to DFS copies run on the server in one request (a whole\n"
    "tree with -r); a local tree goes up many files per request; big files stream.\n";

constexpr char kEpilog[] =
    "FIFOs, sockets and devices are reported and skipped (the file system cannot hold them); new\n"
    "files and directories get the source's mode less the umask unless modes are preserved.\n"
    "Exit status: 0 if everything was copied, 1 if anything failed (the rest is still copied).";

// --preserve / --no-preserve lists.
absl::Status Preserve(std::string_view list, bool on, Options* o) {
  for (absl::string_view piece : absl::StrSplit(ToAbsl(list), ',')) {
    std::string_view item = FromAbsl(piece);
    if (item == "mode") {
      o->preserve_mode = on;
      o->default_modes = !on;
    } else if (item == "timestamps") {
      o->preserve_timestamps = on;
    } else if (item == "all") {
      o->preserve_mode = o->preserve_timestamps = on;
      o->default_modes = !on;
    } else if (item != "ownership" && item != "links" && item != "context" && item != "xattr") {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid argument '", ToAbsl(item), "' for '--preserve'"));
    }
  }
  return absl::OkStatus();
}

using Arg = FlagSet::Argument;

// An option that runs `action` (which cannot fail).
FlagSet::OnOption Does(std::function<void()> action) {
  return [action = std::move(action)](std::optional<std::string_view>) {
    action();
    return absl::OkStatus();
  };
}

// cp's options, into `c`: the one table that parses and documents.
FlagSet Flags(Command* c) {
  FlagSet flags("ardma-cp", kUsage);
  Options& o = c->options;
  flags.Option("archive", 'a', Arg::kNone, "", "same as -dR --preserve=all", Does([&o] {
                 o.recursive = o.preserve_mode = o.preserve_timestamps = true;
                 o.deref = Deref::kNever;
               }));
  flags.Option("", 'd', Arg::kNone, "", "same as --no-dereference --preserve=links",
               Does([&o] { o.deref = Deref::kNever; }));
  flags.Option("force", 'f', Arg::kNone, "",
               "if a local destination cannot be opened, remove it and try again",
               Does([&o] { o.force = true; }));
  flags.Option("", 'H', Arg::kNone, "", "follow symbolic links named on the command line",
               Does([&o] { o.deref = Deref::kCommandLine; }));
  flags.Option("dereference", 'L', Arg::kNone, "", "always follow symbolic links in SOURCE",
               Does([&o] { o.deref = Deref::kAlways; }));
  flags.Option("no-clobber", 'n', Arg::kNone, "", "do not overwrite an existing file",
               Does([&o] { o.no_clobber = true; }));
  flags.Option("parents", 0, Arg::kNone, "", "use full source file name under DIRECTORY",
               Does([c] { c->parents = true; }));
  flags.Option("update", 'u', Arg::kNone, "",
               "copy only when the SOURCE file is newer than the destination file or when the\n"
               "destination file is missing",
               Does([&o] { o.update = true; }));
  flags.Option("no-dereference", 'P', Arg::kNone, "",
               "never follow symbolic links in SOURCE (the default with -r)",
               Does([&o] { o.deref = Deref::kNever; }));
  flags.Option("", 'p', Arg::kNone, "", "same as --preserve=mode,ownership,timestamps",
               Does([&o] { o.preserve_mode = o.preserve_timestamps = true; }));
  flags.Option("preserve", 0, Arg::kOptional, "ATTR_LIST",
               "preserve the attributes (default: mode,ownership,timestamps);\n"
               "also links, context, xattr, all (the file system keeps modes and\n"
               "modification times only: the rest is accepted and not kept)",
               [&o](std::optional<std::string_view> v) {
                 return Preserve(v.value_or("mode,ownership,timestamps"), true, &o);
               });
  flags.Option("no-preserve", 0, Arg::kRequired, "ATTR_LIST", "don't preserve the attributes",
               [&o](std::optional<std::string_view> v) { return Preserve(*v, false, &o); });
  flags.Option("recursive", 'r', Arg::kNone, "", "copy directories recursively",
               Does([&o] { o.recursive = true; }));
  flags.Short('R', "recursive");
  flags.Option("target-directory", 't', Arg::kRequired, "DIRECTORY",
               "copy all SOURCE arguments into DIRECTORY", [c](std::optional<std::string_view> v) {
                 c->target_directory = std::string(*v);
                 return absl::OkStatus();
               });
  flags.Option("no-target-directory", 'T', Arg::kNone, "", "treat DEST as a normal file",
               Does([c] { c->no_target_directory = true; }));
  flags.Option("verbose", 'v', Arg::kNone, "", "explain what is being done",
               Does([&o] { o.verbose = true; }));
  flags.Option("progress", 0, Arg::kNone, "",
               "show a progress bar on standard error (when it is a terminal)",
               Does([&o] { o.progress = true; }));
  c->Declare(flags);
  return flags;
}

}  // namespace

std::string Help() {
  Command c;
  return Flags(&c).GnuHelp(kEpilog);
}

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  Command c;
  FlagSet flags = Flags(&c);
  ARDMA_ASSIGN_OR_RETURN(c.operands, flags.ParseGnu(argc, argv));
  c.help = flags.help_requested();
  c.version = flags.version_requested();
  if (c.help || c.version) return c;
  std::vector<std::string>& operands = c.operands;
  if (!c.target_directory.empty() && c.no_target_directory) {
    return absl::InvalidArgumentError(
        "cannot combine --target-directory (-t) and "
        "--no-target-directory (-T)");
  }
  if (!c.target_directory.empty()) {
    if (operands.empty()) return absl::InvalidArgumentError("missing file operand");
    operands.push_back(c.target_directory);
  } else if (operands.size() < 2) {
    return absl::InvalidArgumentError(
        operands.empty() ? "missing file operand"
                         : "missing destination file operand after '" + operands[0] + "'");
  }
  if (c.no_target_directory && operands.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat("extra operand '", operands[2], "'"));
  }
  return c;
}

int RunCommand(const Command& c) {
  absl::StatusOr<ClientOptions> options = c.ConnectOptions();
  absl::StatusOr<std::unique_ptr<Servers>> servers =
      options.ok() ? cluster::ConnectServers(c.server, *options) : options.status();
  if (!servers.ok()) {
    std::cerr << "ardma-cp: " << servers.status().message() << "\n";
    return 1;
  }
  DfsClient fs(servers->get(), c.mode, c.fs);
  Copier copier(&fs, c.options);
  Location dest = ParseLocation(c.operands.back());
  std::optional<FileType> dest_kind = copier.Kind(dest);
  if (dest_kind == FileType::kSymlink && !c.no_target_directory) {
    // A link to a directory is a target directory, as for cp.
    Location through = dest;
    if (dest.remote) {
      absl::StatusOr<std::string> real = fs.FollowLinks(dest.path);
      if (real.ok() && copier.Kind(ParseLocation("dfs:" + *real)) == FileType::kDirectory) {
        dest_kind = FileType::kDirectory;
      }
    } else {
      struct stat st;
      if (::stat(dest.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        dest_kind = FileType::kDirectory;
      }
    }
  }
  bool into = dest_kind == FileType::kDirectory && !c.no_target_directory;
  bool trailing_slash = dest.path.size() > 1 && dest.path.back() == '/';
  if (trailing_slash && !dest_kind) {  // "file/" is nothing; the file without the slash is
    Location bare = dest;
    while (bare.path.size() > 1 && bare.path.back() == '/') bare.path.pop_back();
    if (std::optional<FileType> k = copier.Kind(bare); k == FileType::kFile) dest_kind = k;
  }
  if ((c.operands.size() > 2 || !c.target_directory.empty()) && !into) {
    std::cerr << "ardma-cp: target " << (c.target_directory.empty() ? "" : "directory ")
              << Quoted(dest.display) << ": "
              << (dest_kind ? "Not a directory" : "No such file or directory") << "\n";
    return 1;
  }
  if (trailing_slash && dest_kind && dest_kind != FileType::kDirectory) {
    std::cerr << "ardma-cp: cannot stat " << Quoted(dest.display) << ": Not a directory\n";
    return 1;
  }
  if (c.parents && !into) {
    std::cerr << "ardma-cp: with --parents, the destination must be a directory\n"
              << "Try 'ardma-cp --help' for more information.\n";
    return 1;
  }
  for (size_t i = 0; i + 1 < c.operands.size(); ++i) {
    Location src = ParseLocation(c.operands[i]);
    if (!src.remote && !dest.remote) {
      copier.Fail(absl::StrCat(Quoted(src.display), " and ", Quoted(dest.display),
                               " are both local: use cp"));
      continue;
    }
    Location target = into ? Join(dest, Basename(src.path)) : dest;
    if (c.parents) {  // DIRECTORY/SOURCE, with SOURCE's directories made as needed
      std::string rel = src.path.substr(std::min(src.path.find_first_not_of('/'),
                                                 src.path.size()));
      if (!copier.MakeParents(src, dest, rel)) continue;
      target = Join(dest, rel);
    }
    if (!into && trailing_slash &&
        copier.Kind(src).value_or(FileType::kFile) != FileType::kDirectory) {
      copier.Fail(
          absl::StrCat("cannot create regular file ", Quoted(dest.display), ": Not a directory"));
      continue;
    }
    copier.CopyOperand(src, target);
  }
  copier.Finish();
  std::fflush(stdout);
  return copier.failed() ? 1 : 0;
}

}  // namespace ardma::cp
