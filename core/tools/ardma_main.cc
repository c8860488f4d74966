// ardma: the admin CLI, for looking at and poking a live ardmad.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/client/client.h"
#include "core/host_port.h"
#include "core/status_macros.h"
#include "core/tools/flag_set.h"
#include "services/dfs/dfs_client.h"
#include "services/lock/lock_client.h"

namespace {

constexpr char kUsage[] =
    "Usage: ardma [--server HOST:PORT] COMMAND [ARGS]\n"
    "\n"
    "Admin CLI for a live ardmad. The server defaults to $ARDMA_SERVER, then 127.0.0.1:15712.\n"
    "Numbers may be decimal or 0x-prefixed hex.\n"
    "\n"
    "Commands:\n"
    "  ping [COUNT]                  round trips, with their latency\n"
    "  stats                         the server's counters\n"
    "  load [--kind K] FILE [KIND [NAME]]\n"
    "                                ship code (K native or jvm; default: jvm for .class and\n"
    "                                .jar files, else native); prints its hash\n"
    "  has HASH                      is the code with this hash loaded?\n"
    "  exec FUNCTION [ARGS]          run an active function; ARGS are bytes (see --hex)\n"
    "  read ADDR LEN                 read LEN bytes (hex dump; raw with --raw)\n"
    "  write ADDR DATA               write DATA (bytes; see --hex)\n"
    "  cas ADDR EXPECTED DESIRED     compare-and-swap a 64-bit word; prints swapped and old value\n"
    "  fetch-add ADDR DELTA          add to a 64-bit word; prints the old value\n"
    "  lock NAME [--shared] [--timeout S] [--lease S] -- COMMAND [ARGS...]\n"
    "                                run COMMAND while holding the named FCFS lock (like flock(1));\n"
    "                                waits up to --timeout (default: for ever), renews the lease\n"
    "                                while COMMAND runs, gives COMMAND the fencing token in\n"
    "                                $ARDMA_LOCK_TOKEN and exits with COMMAND's status\n"
    "  fs ls [-l] PATH...             list directories (long: type, mode, size, mtime)\n"
    "  fs cat PATH...                print files\n"
    "  fs put LOCAL PATH             upload a local file (replacing PATH)\n"
    "  fs get PATH LOCAL             download a file\n"
    "  fs mkdir [-p] PATH...         make directories (-p: parents too, no error if present)\n"
    "  fs rm [-r] PATH...            remove files (-r: directories and all below)\n"
    "  fs mv FROM TO                 rename a file or directory\n"
    "  fs stat PATH...               type, size, mode, times\n"
    "  fs df                         files, directories, data blocks, heap in use\n"
    "                                (file system --fs, default \"default\"; paths are absolute)\n"
    "\n"
    "Exit status: 0 on success, 1 when the server answers with an error (lock: not acquired),\n"
    "2 for bad usage; lock exits with COMMAND's status (128+N if a signal N ended it).";

struct Options {
  std::string server = ardma::DefaultServerAddress();
  int64_t region = 0;
  bool hex = false;
  bool raw = false;
  absl::Duration timeout = absl::ZeroDuration();  // unset: 30 s per call; lock: wait for ever
  bool shared = false;
  absl::Duration lease = ardma::lock::kDefaultLease;
  std::string fs = "default";
  bool long_list = false;
  bool parents = false;
  bool recursive = false;
  std::string kind;  // load: native or jvm; empty: from the file name
};

constexpr absl::Duration kDefaultCallTimeout = absl::Seconds(30);

// `ardma lock`: runs the command under the lock, renewing the lease until it exits. Returns the
// exit code for main.
absl::StatusOr<int> RunLocked(const Options& opt, const std::string& name,
                              const std::vector<std::string>& command) {
  ardma::ClientOptions client_options;
  client_options.connect_attempts = 2;
  ARDMA_ASSIGN_OR_RETURN(auto client, ardma::Client::Connect(opt.server, client_options));
  ardma::lock::LockClient locks(client.get(), ardma::Mode::kActive);
  absl::Duration wait = opt.timeout > absl::ZeroDuration() ? opt.timeout : absl::InfiniteDuration();
  auto mode = opt.shared ? ardma::lock::LockMode::kShared : ardma::lock::LockMode::kExclusive;
  ARDMA_ASSIGN_OR_RETURN(ardma::lock::Grant grant, locks.Acquire(name, mode, wait, opt.lease));
  std::string token = absl::StrCat(grant.token);
  pid_t child = ::fork();
  if (child < 0) {
    locks.Release(grant).IgnoreError();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (child == 0) {
    ::setenv("ARDMA_LOCK_TOKEN", token.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "ardma lock: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  // Renew at a third of the lease while the command runs.
  int status = 0;
  bool lost = false;
  absl::Time next_renewal = absl::Now() + opt.lease / 3;
  for (;;) {
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      locks.Release(grant).IgnoreError();
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    absl::SleepFor(std::min(absl::Milliseconds(20), opt.lease / 10));
    if (absl::Now() < next_renewal) continue;
    next_renewal = absl::Now() + opt.lease / 3;
    if (!lost && !locks.Renew(grant, opt.lease).ok()) {
      lost = true;
      std::fprintf(stderr, "ardma lock: lost the lock '%s' (lease ran out); COMMAND goes on\n",
                   name.c_str());
    }
  }
  if (!lost) {
    if (absl::Status s = locks.Release(grant); !s.ok()) {
      std::fprintf(stderr, "ardma lock: releasing '%s': %s\n", name.c_str(),
                   std::string(s.message()).c_str());
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

absl::StatusOr<uint64_t> ParseNumber(const std::string& text) {
  uint64_t v;
  bool ok = text.size() > 2 && (text[1] == 'x' || text[1] == 'X')
                ? absl::SimpleHexAtoi(text.substr(2), &v)
                : absl::SimpleAtoi(text, &v);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("not a number: '", text, "'"));
  return v;
}

absl::StatusOr<std::string> ParseHex(const std::string& text) {
  if (text.size() % 2 != 0) return absl::InvalidArgumentError("hex data needs an even length");
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    int v;
    if (std::sscanf(text.substr(i, 2).c_str(), "%2x", &v) != 1) {
      return absl::InvalidArgumentError("bad hex data");
    }
    out.push_back(static_cast<char>(v));
  }
  return out;
}

std::string HexDump(std::string_view bytes, uint64_t base) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 16) {
    absl::StrAppendFormat(&out, "%016x  ", base + i);
    std::string ascii;
    for (size_t j = i; j < i + 16; ++j) {
      if (j < bytes.size()) {
        unsigned char c = static_cast<unsigned char>(bytes[j]);
        absl::StrAppendFormat(&out, "%02x ", c);
        ascii.push_back(c >= 32 && c < 127 ? static_cast<char>(c) : '.');
      } else {
        out += "   ";
      }
    }
    absl::StrAppend(&out, " |", ascii, "|\n");
  }
  return out;
}

void WriteResult(const Options& opt, std::string_view bytes) {
  if (opt.hex) {
    for (unsigned char c : bytes) std::printf("%02x", c);
    std::printf("\n");
  } else {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    if (isatty(STDOUT_FILENO) && (bytes.empty() || bytes.back() != '\n')) std::printf("\n");
  }
}

// Usage errors exit with 2, like grep's; they carry this payload to tell them apart.
constexpr char kUsagePayload[] = "ardma/usage";

absl::Status Usage(const std::string& message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kUsagePayload, absl::Cord("1"));
  return s;
}

std::string TypeName(ardma::dfs::FileType t) {
  return t == ardma::dfs::FileType::kDirectory ? "directory" : "file";
}

std::string LongLine(const ardma::dfs::Stat& st, std::string_view name) {
  return absl::StrFormat("%c%04o %12d %s %s", st.type == ardma::dfs::FileType::kDirectory ? 'd' : '-',
                         st.mode, st.size,
                         absl::FormatTime("%Y-%m-%d %H:%M:%S", st.mtime, absl::LocalTimeZone()),
                         std::string(name));
}

absl::Status WholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return absl::OkStatus();
}

// `ardma fs ...`: the file system for people at a shell.
absl::Status RunFs(const Options& opt, const std::vector<std::string>& args) {
  if (args.size() < 2) return Usage("usage: ardma fs ls|cat|put|get|mkdir|rm|mv|stat|df ...");
  const std::string& cmd = args[1];
  std::vector<std::string> operands(args.begin() + 2, args.end());
  auto need = [&](size_t min, size_t max, const char* usage) -> absl::Status {
    if (operands.size() < min || operands.size() > max) {
      return Usage(absl::StrCat("usage: ardma fs ", usage));
    }
    return absl::OkStatus();
  };
  static const std::vector<std::string> kFsCommands = {"ls", "cat", "put",  "get", "mkdir",
                                                       "rm", "mv",  "stat", "df"};
  if (std::find(kFsCommands.begin(), kFsCommands.end(), cmd) == kFsCommands.end()) {
    return Usage(absl::StrCat("unknown fs command '", cmd, "' (see --help)"));
  }
  if (cmd == "ls") ARDMA_RETURN_IF_ERROR(need(1, 1000, "ls [-l] PATH..."));
  if (cmd == "cat") ARDMA_RETURN_IF_ERROR(need(1, 1000, "cat PATH..."));
  if (cmd == "put") ARDMA_RETURN_IF_ERROR(need(2, 2, "put LOCAL PATH"));
  if (cmd == "get") ARDMA_RETURN_IF_ERROR(need(2, 2, "get PATH LOCAL"));
  if (cmd == "mkdir") ARDMA_RETURN_IF_ERROR(need(1, 1000, "mkdir [-p] PATH..."));
  if (cmd == "rm") ARDMA_RETURN_IF_ERROR(need(1, 1000, "rm [-r] PATH..."));
  if (cmd == "mv") ARDMA_RETURN_IF_ERROR(need(2, 2, "mv FROM TO"));
  if (cmd == "stat") ARDMA_RETURN_IF_ERROR(need(1, 1000, "stat PATH..."));
  if (cmd == "df") ARDMA_RETURN_IF_ERROR(need(0, 0, "df"));
  ardma::ClientOptions client_options;
  client_options.connect_attempts = 2;
  if (opt.timeout > absl::ZeroDuration()) client_options.timeout = opt.timeout;
  ARDMA_ASSIGN_OR_RETURN(auto client, ardma::Client::Connect(opt.server, client_options));
  ardma::dfs::DfsClient fs(client.get(), ardma::Mode::kActive, opt.fs);
  if (cmd == "ls") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(ardma::dfs::Stat st, fs.Lookup(path));
      if (st.type == ardma::dfs::FileType::kFile) {
        std::printf("%s\n", opt.long_list ? LongLine(st, path).c_str() : path.c_str());
        continue;
      }
      if (operands.size() > 1) std::printf("%s:\n", path.c_str());
      ARDMA_ASSIGN_OR_RETURN(std::vector<ardma::dfs::DirEntry> entries, fs.ListDir(path));
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.name < b.name; });
      for (const auto& e : entries) {
        if (!opt.long_list) {
          std::printf("%s\n", e.name.c_str());
          continue;
        }
        std::string child = path == "/" ? "/" + e.name : path + "/" + e.name;
        absl::StatusOr<ardma::dfs::Stat> cst = fs.Lookup(child);
        if (cst.ok()) std::printf("%s\n", LongLine(*cst, e.name).c_str());
      }
    }
    return absl::OkStatus();
  }
  if (cmd == "cat") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(std::string data, fs.ReadFile(path));
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
    ARDMA_ASSIGN_OR_RETURN(std::string data, fs.ReadFile(operands[0]));
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
      ARDMA_ASSIGN_OR_RETURN(std::vector<std::string_view> parts, ardma::dfs::SplitPath(path));
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
      ARDMA_ASSIGN_OR_RETURN(ardma::dfs::Stat st, fs.Lookup(path));
      if (st.type == ardma::dfs::FileType::kFile) {
        ARDMA_RETURN_IF_ERROR(fs.Unlink(path));
        continue;
      }
      if (!opt.recursive) {
        return absl::FailedPreconditionError(absl::StrCat(path, " is a directory (use -r)"));
      }
      // Everything below, deepest last in find's order: remove in reverse.
      std::vector<ardma::dfs::FoundEntry> all;
      std::string cursor;
      for (;;) {
        ARDMA_ASSIGN_OR_RETURN(ardma::dfs::FindPage page, fs.Find(path, cursor));
        for (auto& e : page.entries) all.push_back(std::move(e));
        if (page.done) break;
        cursor = page.next;
      }
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        ARDMA_RETURN_IF_ERROR(it->type == ardma::dfs::FileType::kDirectory ? fs.Rmdir(it->path)
                                                                           : fs.Unlink(it->path));
      }
    }
    return absl::OkStatus();
  }
  if (cmd == "mv") return fs.Rename(operands[0], operands[1]);
  if (cmd == "stat") {
    for (const std::string& path : operands) {
      ARDMA_ASSIGN_OR_RETURN(ardma::dfs::Stat st, fs.Lookup(path));
      std::printf("%s: %s, %llu bytes, mode %04o, inode %llu\n  modified %s\n  changed  %s\n",
                  path.c_str(), TypeName(st.type).c_str(),
                  static_cast<unsigned long long>(st.size), st.mode,
                  static_cast<unsigned long long>(st.ino),
                  absl::FormatTime(st.mtime, absl::LocalTimeZone()).c_str(),
                  absl::FormatTime(st.ctime, absl::LocalTimeZone()).c_str());
    }
    return absl::OkStatus();
  }
  // df
  ARDMA_ASSIGN_OR_RETURN(ardma::dfs::Usage u, fs.GetUsage());
  std::printf("file system %s: %llu files, %llu directories, %llu data blocks of %llu bytes "
              "(%llu bytes); heap in use %llu bytes\n",
              opt.fs.c_str(), static_cast<unsigned long long>(u.files),
              static_cast<unsigned long long>(u.directories),
              static_cast<unsigned long long>(u.data_blocks),
              static_cast<unsigned long long>(ardma::dfs::kBlockSize),
              static_cast<unsigned long long>(u.data_blocks * ardma::dfs::kBlockSize),
              static_cast<unsigned long long>(u.heap_allocated));
  return absl::OkStatus();
}

absl::Status Run(const Options& opt, const std::vector<std::string>& args) {
  const std::string& cmd = args[0];
  auto need = [&](size_t min, size_t max, const char* usage) -> absl::Status {
    if (args.size() - 1 < min || args.size() - 1 > max) {
      return Usage(absl::StrCat("usage: ardma ", usage));
    }
    return absl::OkStatus();
  };
  static const std::vector<std::string> kCommands = {
      "ping", "stats", "load", "has", "exec", "read", "write", "cas", "fetch-add", "lock", "fs"};
  if (std::find(kCommands.begin(), kCommands.end(), cmd) == kCommands.end()) {
    return Usage(absl::StrCat("unknown command '", cmd, "' (see --help)"));
  }
  if (cmd == "fs") return RunFs(opt, args);
  ardma::RegionId region = static_cast<ardma::RegionId>(opt.region);
  absl::Duration timeout = opt.timeout > absl::ZeroDuration() ? opt.timeout : kDefaultCallTimeout;
  ardma::CallOptions call{timeout};
  ardma::ClientOptions client_options;
  client_options.timeout = timeout;
  client_options.connect_attempts = 2;
  auto connect = [&]() { return ardma::Client::Connect(opt.server, client_options); };

  if (cmd == "ping") {
    ARDMA_RETURN_IF_ERROR(need(0, 1, "ping [COUNT]"));
    uint64_t count = 1;
    if (args.size() == 2) {
      ARDMA_ASSIGN_OR_RETURN(count, ParseNumber(args[1]));
    }
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    for (uint64_t i = 0; i < count; ++i) {
      absl::Time start = absl::Now();
      ARDMA_RETURN_IF_ERROR(client->Ping(call));
      std::printf("reply from %s: seq=%llu time=%.1f us\n", opt.server.c_str(),
                  static_cast<unsigned long long>(i),
                  absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    return absl::OkStatus();
  }
  if (cmd == "stats") {
    ARDMA_RETURN_IF_ERROR(need(0, 0, "stats"));
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(auto stats, client->Stats(call));
    for (const auto& [name, value] : stats) {
      std::printf("%-28s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
    }
    return absl::OkStatus();
  }
  if (cmd == "load") {
    ARDMA_RETURN_IF_ERROR(need(1, 3, "load FILE [KIND [NAME]]"));
    std::ifstream in(args[1], std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", args[1]));
    std::string code((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string kind_name = args.size() >= 3 ? args[2] : opt.kind;
    if (kind_name.empty()) {
      kind_name = absl::EndsWith(args[1], ".class") || absl::EndsWith(args[1], ".jar") ? "jvm"
                                                                                       : "native";
    }
    ardma::wire::CodeKind kind = ardma::wire::CodeKind::kNative;
    if (kind_name == "jvm") {
      kind = ardma::wire::CodeKind::kJvm;
    } else if (kind_name != "native") {
      return Usage("KIND is native or jvm");
    }
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(ardma::wire::CodeHash hash,
                           client->Load(kind, args.size() == 4 ? args[3] : "", code, call));
    std::printf("%s\n", ardma::wire::HashToHex(hash).c_str());
    return absl::OkStatus();
  }
  if (cmd == "has") {
    ARDMA_RETURN_IF_ERROR(need(1, 1, "has HASH"));
    ARDMA_ASSIGN_OR_RETURN(ardma::wire::CodeHash hash, ardma::wire::HashFromHex(args[1]));
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(bool present, client->HasCode(hash, call));
    std::printf("%s\n", present ? "loaded" : "not loaded");
    return present ? absl::OkStatus() : absl::NotFoundError("not loaded");
  }
  if (cmd == "exec") {
    ARDMA_RETURN_IF_ERROR(need(1, 2, "exec FUNCTION [ARGS]"));
    std::string fn_args = args.size() == 3 ? args[2] : "";
    if (opt.hex) {
      ARDMA_ASSIGN_OR_RETURN(fn_args, ParseHex(fn_args));
    }
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(std::string result, client->Execute(args[1], fn_args, call));
    WriteResult(opt, result);
    return absl::OkStatus();
  }
  if (cmd == "read") {
    ARDMA_RETURN_IF_ERROR(need(2, 2, "read ADDR LEN"));
    ARDMA_ASSIGN_OR_RETURN(uint64_t addr, ParseNumber(args[1]));
    ARDMA_ASSIGN_OR_RETURN(uint64_t len, ParseNumber(args[2]));
    if (len > UINT32_MAX) return Usage("LEN too large");
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(std::string bytes,
                           client->Read(addr, static_cast<uint32_t>(len), region, call));
    if (opt.raw || opt.hex) {
      WriteResult(opt, bytes);
    } else {
      std::fputs(HexDump(bytes, addr).c_str(), stdout);
    }
    return absl::OkStatus();
  }
  if (cmd == "write") {
    ARDMA_RETURN_IF_ERROR(need(2, 2, "write ADDR DATA"));
    ARDMA_ASSIGN_OR_RETURN(uint64_t addr, ParseNumber(args[1]));
    std::string data = args[2];
    if (opt.hex) {
      ARDMA_ASSIGN_OR_RETURN(data, ParseHex(data));
    }
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_RETURN_IF_ERROR(client->Write(addr, data, region, call));
    std::printf("wrote %zu bytes at %llu\n", data.size(), static_cast<unsigned long long>(addr));
    return absl::OkStatus();
  }
  if (cmd == "cas") {
    ARDMA_RETURN_IF_ERROR(need(3, 3, "cas ADDR EXPECTED DESIRED"));
    ARDMA_ASSIGN_OR_RETURN(uint64_t addr, ParseNumber(args[1]));
    ARDMA_ASSIGN_OR_RETURN(uint64_t expected, ParseNumber(args[2]));
    ARDMA_ASSIGN_OR_RETURN(uint64_t desired, ParseNumber(args[3]));
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(ardma::CasResult r,
                           client->CompareAndSwap(addr, expected, desired, region, call));
    std::printf("%s old=%llu\n", r.swapped ? "swapped" : "not-swapped",
                static_cast<unsigned long long>(r.observed));
    return absl::OkStatus();
  }
  // fetch-add
  ARDMA_RETURN_IF_ERROR(need(2, 2, "fetch-add ADDR DELTA"));
  ARDMA_ASSIGN_OR_RETURN(uint64_t addr, ParseNumber(args[1]));
  ARDMA_ASSIGN_OR_RETURN(uint64_t delta, ParseNumber(args[2]));
  ARDMA_ASSIGN_OR_RETURN(auto client, connect());
  ARDMA_ASSIGN_OR_RETURN(uint64_t old, client->FetchAdd(addr, delta, region, call));
  std::printf("old=%llu\n", static_cast<unsigned long long>(old));
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  ardma::FlagSet flags("ardma", kUsage);
  flags.String("server", &opt.server, "HOST:PORT", "the ardmad to talk to");
  flags.Int("region", &opt.region, "N", "region for read/write/cas/fetch-add");
  flags.Bool("hex", &opt.hex, "ARGS/DATA are given, and results printed, as hex");
  flags.Bool("raw", &opt.raw, "read prints raw bytes instead of a hex dump");
  flags.String("kind", &opt.kind, "KIND",
               "load: native (a shared object) or jvm (a .class or .jar)");
  flags.Duration("timeout", &opt.timeout,
                 "per-call timeout (unset: 30s); for lock, how long to wait (unset: for ever)");
  flags.Bool("shared", &opt.shared, "lock: take the lock shared (default exclusive)");
  flags.Duration("lease", &opt.lease, "lock: lease, renewed at a third of it while COMMAND runs");
  flags.String("fs", &opt.fs, "NAME", "fs: the file system");
  flags.Bool("long", &opt.long_list, "fs ls: long listing");
  flags.Bool("parents", &opt.parents, "fs mkdir: make missing parents, accept existing");
  flags.Bool("recursive", &opt.recursive, "fs rm: remove directories and everything below");
  flags.Short('l', "long");
  flags.Short('p', "parents");
  flags.Short('r', "recursive");
  std::vector<std::string> positional;
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv, &positional)) {
    return *exit_code;
  }
  if (positional.empty()) {
    std::cerr << "ardma: missing COMMAND (see --help)\n";
    return 2;
  }
  if (positional[0] == "lock") {
    if (positional.size() < 3) {
      std::cerr << "ardma: usage: ardma lock NAME [--shared] [--timeout S] -- COMMAND [ARGS...]\n";
      return 2;
    }
    if (absl::Status s = ardma::lock::CheckLease(opt.lease); !s.ok()) {
      std::cerr << "ardma: --lease: " << s.message() << "\n";
      return 2;
    }
    absl::StatusOr<int> code = RunLocked(
        opt, positional[1], std::vector<std::string>(positional.begin() + 2, positional.end()));
    if (!code.ok()) {
      std::cerr << "ardma: lock '" << positional[1] << "': "
                << absl::StatusCodeToString(code.status().code()) << ": "
                << code.status().message() << "\n";
      return 1;
    }
    return *code;
  }
  absl::Status status = Run(opt, positional);
  if (!status.ok()) {
    bool usage = status.GetPayload(kUsagePayload).has_value();
    std::cerr << "ardma: "
              << (usage ? std::string(status.message())
                        : absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                       status.message()))
              << "\n";
    return usage ? 2 : 1;
  }
  return 0;
}
