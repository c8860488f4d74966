#define FUSE_USE_VERSION 312
#include "apps/mount/mount_cli.h"

#include <fuse_lowlevel.h>
#include <malloc.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/cli/flag_set.h"
#include "core/client/client.h"
#include "core/cluster/router.h"
#include "core/status_macros.h"
#include "services/dfs/dfs_client.h"

namespace ardma::mount {

namespace {

absl::Status MountOption(std::string_view opt, Command* c) {
  std::pair<std::string, std::string> kv = absl::StrSplit(ToAbsl(opt), absl::MaxSplits('=', 1));
  const std::string& k = kv.first;
  const std::string& v = kv.second;
  double seconds;
  uint32_t bytes;
  if (k == "attr_timeout" || k == "entry_timeout") {
    if (!absl::SimpleAtod(v, &seconds) || seconds < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad ", k, " '", v, "'"));
    }
    (k == "attr_timeout" ? c->options.attr_timeout : c->options.entry_timeout) = seconds;
  } else if (k == "writeback_cache") {
    c->options.writeback_cache = true;
  } else if (k == "max_write") {
    if (!absl::SimpleAtoi(v, &bytes) || bytes < 4096 || bytes > (16u << 20)) {
      return absl::InvalidArgumentError(absl::StrCat("bad max_write '", v, "'"));
    }
    c->options.max_write = bytes;
  } else {
    c->fuse_options.emplace_back(opt);
  }
  return absl::OkStatus();
}

constexpr char kUsage[] =
    "Usage: ardma-mount [OPTION]... MOUNTPOINT\n"
    "Mount an ardmad's file system (the DFS) at MOUNTPOINT through FUSE, so every program can use\n"
    "it. Each file-system call is one DFS operation: one round trip in active mode.\n";

constexpr char kEpilog[] =
    "Unmount with 'fusermount3 -u MOUNTPOINT' (or umount as root), or stop it with SIGINT or\n"
    "SIGTERM: it unmounts before it exits. Exit status: 0 after a clean unmount, 1 otherwise.";

using Arg = FlagSet::Argument;

// ardma-mount's options, into `c`: the one table that parses and documents.
FlagSet Flags(Command* c) {
  FlagSet flags("ardma-mount", kUsage);
  c->Declare(flags);
  flags.Option("", 'o', Arg::kRequired, "OPT[,OPT...]",
               "mount options: attr_timeout=SECONDS and entry_timeout=SECONDS (how\n"
               "long the kernel may trust attributes and names; default 1),\n"
               "writeback_cache (the kernel gathers writes; see docs/mount.md),\n"
               "max_write=BYTES (default 1048576); the rest go to FUSE\n"
               "(allow_other, ro, default_permissions, ...)",
               [c](std::optional<std::string_view> v) {
                 for (absl::string_view o : absl::StrSplit(ToAbsl(*v), ',', absl::SkipEmpty())) {
                   ARDMA_RETURN_IF_ERROR(MountOption(FromAbsl(o), c));
                 }
                 return absl::OkStatus();
               });
  flags.Option("", 'f', Arg::kNone, "", "stay in the foreground",
               [c](std::optional<std::string_view>) {
                 c->foreground = true;
                 return absl::OkStatus();
               });
  flags.Option("", 'd', Arg::kNone, "", "print FUSE's requests (implies -f)",
               [c](std::optional<std::string_view>) {
                 c->debug = c->foreground = true;
                 return absl::OkStatus();
               });
  flags.Option(
      "threads", 0, Arg::kRequired, "N", "at most N threads serve requests (default: libfuse's)",
      [c](std::optional<std::string_view> v) {
        if (!absl::SimpleAtoi(ToAbsl(*v), &c->threads) || c->threads < 1) {
          return absl::InvalidArgumentError(absl::StrCat("bad --threads '", ToAbsl(*v), "'"));
        }
        return absl::OkStatus();
      });
  flags.Short('h', "help");
  flags.Short('V', "version");
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
  ARDMA_ASSIGN_OR_RETURN(std::vector<std::string> operands, flags.ParseGnu(argc, argv));
  c.help = flags.help_requested();
  c.version = flags.version_requested();
  if (c.help || c.version) return c;
  if (operands.empty()) return absl::InvalidArgumentError("missing MOUNTPOINT");
  if (operands.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("extra operand '", operands[1], "'"));
  }
  c.mountpoint = operands[0];
  return c;
}

int RunCommand(const Command& c) {
  // Reads and writes move up to max_write bytes through fresh buffers: keep those in the heap
  // (reused) rather than mapping and faulting in new pages for every request.
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  absl::StatusOr<ClientOptions> options = c.ConnectOptions();
  absl::StatusOr<std::unique_ptr<Servers>> servers =
      options.ok() ? cluster::ConnectServers(c.server, *options) : options.status();
  if (!servers.ok()) {
    std::cerr << "ardma-mount: " << servers.status().message() << "\n";
    return 1;
  }
  dfs::DfsClient fs(servers->get(), c.mode, c.fs);
  absl::StatusOr<dfs::Stat> root = fs.Lookup("/");  // also creates the file system
  if (!root.ok()) {
    std::cerr << "ardma-mount: " << root.status().message() << "\n";
    return 1;
  }
  DfsFuse dfs_fuse(&fs, c.options, root->ino);
  std::vector<std::string> args = {"ardma-mount", "-o", "fsname=ardma:" + c.fs + ",subtype=ardma"};
  for (const std::string& o : c.fuse_options) {
    args.push_back("-o");
    args.push_back(o);
  }
  if (c.debug) args.push_back("-d");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_session* se =
      fuse_session_new(&fargs, &DfsFuse::Operations(), sizeof(fuse_lowlevel_ops), &dfs_fuse);
  if (se == nullptr) {
    std::cerr << "ardma-mount: bad FUSE options\n";
    return 1;
  }
  int status = 1;
  if (fuse_set_signal_handlers(se) == 0) {
    if (fuse_session_mount(se, c.mountpoint.c_str()) == 0) {
      fuse_daemonize(c.foreground ? 1 : 0);
      // The kernel caps a FUSE mount's read-ahead at 128 KiB; as root, raise it to the read size
      // (once the mount answers, so from another thread).
      std::thread([mountpoint = c.mountpoint, kib = c.options.max_write / 1024] {
        struct stat st;
        if (::stat(mountpoint.c_str(), &st) != 0) return;
        std::string path = absl::StrCat("/sys/class/bdi/", major(st.st_dev), ":", minor(st.st_dev),
                                        "/read_ahead_kb");
        std::ofstream(path) << kib;  // (not root: the kernel's 128 KiB stays)
      }).detach();
      fuse_loop_config* config = fuse_loop_cfg_create();
      if (c.threads > 0) fuse_loop_cfg_set_max_threads(config, static_cast<unsigned>(c.threads));
      // 0: unmounted; a signal number: SIGINT/SIGTERM (we unmount below); negative: an error.
      status = fuse_session_loop_mt(se, config) < 0 ? 1 : 0;
      fuse_loop_cfg_destroy(config);
      fuse_session_unmount(se);
    } else {
      std::cerr << "ardma-mount: cannot mount at " << c.mountpoint << "\n";
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  fuse_opt_free_args(&fargs);
  return status;
}

}  // namespace ardma::mount
