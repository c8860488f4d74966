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
#include "core/host_port.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"

namespace ardma::cp {

using dfs::DfsClient;
using dfs::FileType;

const char kUsage[] =
    "Usage: ardma-cp [OPTION]... [-T] SOURCE DEST\n"
    "  or:  ardma-cp [OPTION]... SOURCE... DIRECTORY\n"
    "  or:  ardma-cp [OPTION]... -t DIRECTORY SOURCE...\n"
    "Copy files and directories, like cp(1); dfs:/PATH names a file in an ardmad's file system,\n"
    "anything else a local file. DFS to DFS copies run on the server in one request (a whole\n"
    "tree with -r); a local tree goes up many files per request; big files stream.\n"
    "\n"
    "  -a, --archive        same as -dR --preserve=all\n"
    "  -d                   same as --no-dereference --preserve=links\n"
    "  -f, --force          if a local destination cannot be opened, remove it and try again\n"
    "  -H                   follow symbolic links named on the command line\n"
    "  -L, --dereference    always follow symbolic links in SOURCE\n"
    "  -n, --no-clobber     do not overwrite an existing file\n"
    "  -P, --no-dereference never follow symbolic links in SOURCE (the default with -r)\n"
    "  -p                   same as --preserve=mode,ownership,timestamps\n"
    "      --preserve[=ATTR_LIST]  preserve the attributes (default: mode,ownership,timestamps);\n"
    "                       also links, context, xattr, all (the file system keeps modes and\n"
    "                       modification times only: the rest is accepted and not kept)\n"
    "      --no-preserve=ATTR_LIST  don't preserve the attributes\n"
    "  -r, -R, --recursive  copy directories recursively\n"
    "  -t, --target-directory=DIRECTORY  copy all SOURCE arguments into DIRECTORY\n"
    "  -T, --no-target-directory  treat DEST as a normal file\n"
    "  -v, --verbose        explain what is being done\n"
    "      --progress       show a progress bar on standard error (when it is a terminal)\n"
    "      --server=HOST:PORT  the ardmad ($ARDMA_SERVER, else 127.0.0.1:15712)\n"
    "      --auth-file=FILE    authenticate as FILE's NAME SECRET (default $ARDMA_AUTH_FILE)\n"
    "      --fs=NAME        the file system (default: default)\n"
    "      --mode=active|rdma  run the file system's code on the server (default) or here\n"
    "                       over one-sided operations\n"
    "      --help           show this help\n"
    "      --version        print the version and commit\n"
    "FIFOs, sockets and devices are reported and skipped (the file system cannot hold them); new\n"
    "files and directories get the source's mode less the umask unless modes are preserved.\n"
    "Exit status: 0 if everything was copied, 1 if anything failed (the rest is still copied).";

namespace {

// --preserve / --no-preserve lists.
absl::Status Preserve(std::string_view list, bool on, Options* o) {
  for (absl::string_view piece : absl::StrSplit(ToAbsl(list), ',')) {
    std::string_view item = FromAbsl(piece);
    if (item == "mode") {
      o->preserve_mode = on;
    } else if (item == "timestamps") {
      o->preserve_timestamps = on;
    } else if (item == "all") {
      o->preserve_mode = o->preserve_timestamps = on;
    } else if (item != "ownership" && item != "links" && item != "context" && item != "xattr") {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid argument '", ToAbsl(item), "' for '--preserve'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv) {
  Command c;
  Options& o = c.options;
  std::vector<std::string>& operands = c.operands;
  bool options_done = false;
  auto value = [&](int& i, const std::string&, std::string_view name) {
    return LongOptionValue(argc, argv, i, name);
  };
  auto is = IsLongOption;
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
    } else if (a == "--force") {
      o.force = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--progress") {
      o.progress = true;
    } else if (a == "--archive") {
      o.recursive = o.preserve_mode = o.preserve_timestamps = true;
      o.deref = Deref::kNever;
    } else if (a == "--dereference") {
      o.deref = Deref::kAlways;
    } else if (a == "--no-dereference") {
      o.deref = Deref::kNever;
    } else if (a == "--no-target-directory") {
      c.no_target_directory = true;
    } else if (a == "--preserve") {
      o.preserve_mode = o.preserve_timestamps = true;
    } else if (a.rfind("--preserve=", 0) == 0) {
      ARDMA_RETURN_IF_ERROR(Preserve(a.substr(11), true, &o));
    } else if (a.rfind("--no-preserve=", 0) == 0) {
      ARDMA_RETURN_IF_ERROR(Preserve(a.substr(14), false, &o));
    } else if (is(a, "--server")) {
      ARDMA_ASSIGN_OR_RETURN(c.server, value(i, a, "--server"));
    } else if (is(a, "--auth-file")) {
      ARDMA_ASSIGN_OR_RETURN(c.auth_file, value(i, a, "--auth-file"));
    } else if (is(a, "--fs")) {
      ARDMA_ASSIGN_OR_RETURN(c.fs, value(i, a, "--fs"));
    } else if (is(a, "--target-directory")) {
      ARDMA_ASSIGN_OR_RETURN(c.target_directory, value(i, a, "--target-directory"));
    } else if (is(a, "--mode")) {
      ARDMA_ASSIGN_OR_RETURN(std::string m, value(i, a, "--mode"));
      ARDMA_ASSIGN_OR_RETURN(c.mode, ParseMode(m));
    } else if (a.size() > 1 && a[1] != '-') {
      for (size_t k = 1; k < a.size(); ++k) {
        switch (a[k]) {
          case 'r':
          case 'R':
            o.recursive = true;
            break;
          case 'n':
            o.no_clobber = true;
            break;
          case 'f':
            o.force = true;
            break;
          case 'p':
            o.preserve_mode = o.preserve_timestamps = true;
            break;
          case 'v':
            o.verbose = true;
            break;
          case 'a':
            o.recursive = o.preserve_mode = o.preserve_timestamps = true;
            o.deref = Deref::kNever;
            break;
          case 'd':
          case 'P':
            o.deref = Deref::kNever;
            break;
          case 'L':
            o.deref = Deref::kAlways;
            break;
          case 'H':
            o.deref = Deref::kCommandLine;
            break;
          case 'T':
            c.no_target_directory = true;
            break;
          case 't':  // -tDIR or -t DIR
            if (k + 1 < a.size()) {
              c.target_directory = a.substr(k + 1);
            } else if (i + 1 < argc) {
              c.target_directory = argv[++i];
            } else {
              return absl::InvalidArgumentError("option requires an argument -- 't'");
            }
            k = a.size();
            break;
          default:
            return absl::InvalidArgumentError(
                absl::StrCat("invalid option -- '", std::string(1, a[k]), "'"));
        }
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unrecognized option '", a, "'"));
    }
  }
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
  absl::StatusOr<ClientOptions> options = OptionsWithAuthFile(c.auth_file);
  absl::StatusOr<std::unique_ptr<Client>> client =
      options.ok() ? Client::Connect(c.server, *options) : options.status();
  if (!client.ok()) {
    std::cerr << "ardma-cp: " << client.status().message() << "\n";
    return 1;
  }
  DfsClient fs(client->get(), c.mode, c.fs);
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
  for (size_t i = 0; i + 1 < c.operands.size(); ++i) {
    Location src = ParseLocation(c.operands[i]);
    if (!src.remote && !dest.remote) {
      copier.Fail(absl::StrCat(Quoted(src.display), " and ", Quoted(dest.display),
                               " are both local: use cp"));
      continue;
    }
    Location target = into ? Join(dest, Basename(src.path)) : dest;
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
