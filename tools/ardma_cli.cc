#include "tools/ardma_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "core/cli/flag_set.h"
#include "core/client/client.h"
#include "core/status_macros.h"

namespace ardma::cli {

const char kUsage[] =
    "Usage: ardma [--server HOST:PORT|etcd://HOST:PORT/NAME] COMMAND [ARGS]\n"
    "\n"
    "Admin CLI for a live ardmad. The server defaults to $ARDMA_SERVER, then 127.0.0.1:15712.\n"
    "Numbers may be decimal or 0x-prefixed hex.\n"
    "\n"
    "Commands:\n"
    "  ping [COUNT]                  round trips, with their latency, then min/avg/max/p99\n"
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
    "                                run COMMAND while holding the named FCFS lock (like "
    "flock(1));\n"
    "                                waits up to --timeout (default: for ever), renews the lease\n"
    "                                while COMMAND runs, gives COMMAND the fencing token in\n"
    "                                $ARDMA_LOCK_TOKEN and exits with COMMAND's status; on a\n"
    "                                cluster with --server etcd://...\n"
    "  fs ls [-l] PATH...             list directories (long: type, mode, size, mtime)\n"
    "  fs cat PATH...                print files\n"
    "  fs put LOCAL PATH             upload a local file (replacing PATH)\n"
    "  fs get PATH LOCAL             download a file\n"
    "  fs mkdir [-p] PATH...         make directories (-p: parents too, no error if present)\n"
    "  fs rm [-r] PATH...            remove files (-r: directories and all below)\n"
    "  fs mv FROM TO                 rename a file or directory\n"
    "  fs ln -s TARGET PATH          make a symbolic link (the DFS has no hard links)\n"
    "  fs readlink PATH...           print symbolic links' targets\n"
    "  fs stat PATH...               type, size, mode, times\n"
    "  fs df                         files, directories, data blocks, heap in use\n"
    "                                (file system --fs, default \"default\"; paths are absolute)\n"
    "  cc status                     the compile farm (ardma-cc): jobs queued and running, slaves\n"
    "  dht get TABLE KEY             a DHT value (also: put TABLE KEY VALUE, insert TABLE KEY\n"
    "                                VALUE, del TABLE KEY, size TABLE, scan TABLE: its keys,\n"
    "                                export TABLE FILE, import TABLE FILE: keys and values to and\n"
    "                                from a file, - for stdout/stdin; --mode rdma runs the\n"
    "                                table's code here); on a cluster with --server etcd://...\n"
    "                                (--read-from-replica: a replica may answer a get)\n"
    "  list push NAME VALUE...       append to a list, print its length (also: pop NAME: remove\n"
    "                                and print the head, len NAME, range NAME [START [STOP]]:\n"
    "                                elements START..STOP, STOP -1 for the end); --mode, cluster\n"
    "                                as dht\n"
    "  cluster create [ID...]        give a cluster its first slot map: the slots evenly over the\n"
    "                                live members (or the IDs); --server etcd://HOST:PORT/NAME;\n"
    "                                --replicas N: each server's writes are applied on the N\n"
    "                                servers after it too before they are acknowledged\n"
    "  cluster status                the cluster's members, their addresses and slots, and slots\n"
    "                                whose server is down (exit 1 then)\n"
    "  cluster rebalance             move slots (and their keys) so that every live member has\n"
    "                                an even share, while clients run (also: add ID, remove ID:\n"
    "                                even over the owners and ID, or all but ID)\n"
    "  cluster fix                   make every member's slot fence agree with the map and drop\n"
    "                                keys it holds for slots it does not own (after a mover died)\n"
    "\n"
    "Exit status: 0 on success, 1 when the server answers with an error or cannot be reached\n"
    "(lock: not acquired), 2 for bad usage (also a malformed number or hex, or a --server that\n"
    "names no host, found before anything is sent); lock exits with COMMAND's status (128+N if a\n"
    "signal N ended it).";

namespace {

// Usage errors exit with 2, like grep's; they carry this payload to tell them apart.
constexpr char kUsagePayload[] = "ardma/usage";

void WriteResult(const Options& opt, std::string_view bytes) {
  if (opt.hex) {
    for (unsigned char c : bytes) std::printf("%02x", c);
    std::printf("\n");
  } else {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    if (isatty(STDOUT_FILENO) && (bytes.empty() || bytes.back() != '\n')) std::printf("\n");
  }
}

}  // namespace

absl::StatusOr<std::string> EncodeTyped(Options::Typed typed,
                                        const std::vector<std::string>& values) {
  std::string out;
  if (typed == Options::Typed::kStr) return absl::StrJoin(values, " ");
  size_t width = typed == Options::Typed::kI32 ? 4 : 8;
  for (const std::string& v : values) {
    int64_t n;
    if (!absl::SimpleAtoi(v, &n) ||
        (width == 4 && (n < INT32_MIN || n > INT32_MAX))) {
      return Usage(absl::StrCat("not a ", width == 4 ? "32" : "64", "-bit integer: '", v, "'"));
    }
    out.append(reinterpret_cast<const char*>(&n), width);  // little-endian: the low bytes first
  }
  return out;
}

absl::StatusOr<std::string> FormatTyped(Options::Typed typed, std::string_view bytes) {
  if (typed == Options::Typed::kStr) return std::string(bytes);
  size_t width = typed == Options::Typed::kI32 ? 4 : 8;
  if (bytes.size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the result's ", bytes.size(),
                                                   " bytes are not a whole number of ",
                                                   width * 8, "-bit integers"));
  }
  std::vector<std::string> parts;
  for (size_t at = 0; at < bytes.size(); at += width) {
    if (width == 4) {
      int32_t v;
      std::memcpy(&v, bytes.data() + at, 4);
      parts.push_back(absl::StrCat(v));
    } else {
      int64_t v;
      std::memcpy(&v, bytes.data() + at, 8);
      parts.push_back(absl::StrCat(v));
    }
  }
  return absl::StrJoin(parts, " ");
}

absl::Status Usage(const std::string& message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kUsagePayload, absl::Cord("1"));
  return s;
}

bool IsUsage(const absl::Status& status) { return status.GetPayload(kUsagePayload).has_value(); }

absl::StatusOr<uint64_t> ParseNumber(const std::string& text) {
  uint64_t v;
  bool ok = text.size() > 2 && (text[1] == 'x' || text[1] == 'X')
                ? absl::SimpleHexAtoi(text.substr(2), &v)
                : absl::SimpleAtoi(text, &v);
  if (!ok) return Usage(absl::StrCat("not a number: '", text, "'"));
  return v;
}

absl::StatusOr<std::string> ParseHex(const std::string& text) {
  if (text.size() % 2 != 0) return Usage("hex data needs an even length");
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    int v;
    if (std::sscanf(text.substr(i, 2).c_str(), "%2x", &v) != 1) {
      return Usage(absl::StrCat("bad hex data: '", text, "'"));
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

absl::Status RunCommand(const Options& opt, const std::vector<std::string>& args) {
  const std::string& cmd = args[0];
  auto need = [&](size_t min, size_t max, const char* usage) -> absl::Status {
    if (args.size() - 1 < min || args.size() - 1 > max) {
      return Usage(absl::StrCat("usage: ardma ", usage));
    }
    return absl::OkStatus();
  };
  static const std::vector<std::string> kCommands = {
      "ping", "stats", "load",  "has", "exec", "read", "write",
      "cas",  "fetch-add", "lock", "fs",  "cc",   "cluster", "dht", "list"};
  if (std::find(kCommands.begin(), kCommands.end(), cmd) == kCommands.end()) {
    return Usage(absl::StrCat("unknown command '", cmd, "' (see --help)"));
  }
  if (cmd == "fs") return RunFsCommand(opt, args);
  if (cmd == "cc") return RunCcCommand(opt, args);
  if (cmd == "cluster") return RunClusterCommand(opt, args);
  if (cmd == "dht") return RunDhtCommand(opt, args);
  if (cmd == "list") return RunListCommand(opt, args);
  RegionId region = static_cast<RegionId>(opt.region);
  absl::Duration timeout = opt.timeout > absl::ZeroDuration() ? opt.timeout : kDefaultCallTimeout;
  CallOptions call{timeout};
  ClientOptions client_options;
  client_options.timeout = timeout;
  client_options.connect_attempts = 2;
  // A server address that is malformed or names no host is a usage error (exit 2), found before
  // anything is sent.
  auto connect = [&]() -> absl::StatusOr<std::unique_ptr<Client>> {
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(opt.server, client_options);
    if (c.status().code() == absl::StatusCode::kInvalidArgument) {
      return Usage(absl::StrCat("--server ", opt.server, ": ", c.status().message()));
    }
    return c;
  };

  if (cmd == "ping") {
    ARDMA_RETURN_IF_ERROR(need(0, 1, "ping [COUNT]"));
    uint64_t count = 1;
    if (args.size() == 2) {
      ARDMA_ASSIGN_OR_RETURN(count, ParseNumber(args[1]));
    }
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    std::vector<double> us;  // each reply's time
    for (uint64_t i = 0; i < count; ++i) {
      absl::Time start = absl::Now();
      ARDMA_RETURN_IF_ERROR(client->Ping(call));
      us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      std::printf("reply from %s: seq=%llu time=%.1f us\n", opt.server.c_str(),
                  static_cast<unsigned long long>(i), us.back());
    }
    if (us.empty()) return absl::OkStatus();
    // As ping(8) ends, with the 99th percentile redis-cli --latency users look for.
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double t : us) sum += t;
    size_t p99 = (us.size() * 99 + 99) / 100 - 1;  // the ceil(0.99 n)-th smallest
    std::printf("--- %s ping statistics ---\n%zu replies, time min/avg/max/p99 = "
                "%.1f/%.1f/%.1f/%.1f us\n",
                opt.server.c_str(), us.size(), us.front(), sum / static_cast<double>(us.size()),
                us.back(), us[p99]);
    return absl::OkStatus();
  }
  if (cmd == "stats") {
    ARDMA_RETURN_IF_ERROR(need(0, 0, "stats"));
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(auto stats, client->Stats(call));
    if (opt.json) {  // counter names are [a-z0-9._]: nothing to escape
      std::string out = "{";
      for (size_t i = 0; i < stats.size(); ++i) {
        absl::StrAppend(&out, i == 0 ? "" : ", ", "\"", stats[i].first, "\": ", stats[i].second);
      }
      std::printf("%s}\n", out.c_str());
      return absl::OkStatus();
    }
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
      kind_name =
          absl::EndsWith(args[1], ".class") || absl::EndsWith(args[1], ".jar") ? "jvm" : "native";
    }
    wire::CodeKind kind = wire::CodeKind::kNative;
    if (kind_name == "jvm") {
      kind = wire::CodeKind::kJvm;
    } else if (kind_name != "native") {
      return Usage("KIND is native or jvm");
    }
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(wire::CodeHash hash,
                           client->Load(kind, args.size() == 4 ? args[3] : "", code, call));
    std::printf("%s\n", wire::HashToHex(hash).c_str());
    return absl::OkStatus();
  }
  if (cmd == "has") {
    ARDMA_RETURN_IF_ERROR(need(1, 1, "has HASH"));
    ARDMA_ASSIGN_OR_RETURN(wire::CodeHash hash, wire::HashFromHex(args[1]));
    ARDMA_ASSIGN_OR_RETURN(auto client, connect());
    ARDMA_ASSIGN_OR_RETURN(bool present, client->HasCode(hash, call));
    std::printf("%s\n", present ? "loaded" : "not loaded");
    return present ? absl::OkStatus() : absl::NotFoundError("not loaded");
  }
  if (cmd == "exec") {
    if (opt.typed != Options::Typed::kNone) {  // exec --i32 FUNCTION 1 2 3
      ARDMA_RETURN_IF_ERROR(need(1, 100000, "exec --i32|--i64|--str FUNCTION [VALUE...]"));
      if (opt.hex) return Usage("--hex and --i32/--i64/--str exclude each other");
      ARDMA_ASSIGN_OR_RETURN(std::string fn_args,
                             EncodeTyped(opt.typed, std::vector<std::string>(args.begin() + 2,
                                                                            args.end())));
      ARDMA_ASSIGN_OR_RETURN(auto client, connect());
      ARDMA_ASSIGN_OR_RETURN(std::string result, client->Execute(args[1], fn_args, call));
      ARDMA_ASSIGN_OR_RETURN(std::string text, FormatTyped(opt.typed, result));
      std::printf("%s\n", text.c_str());
      return absl::OkStatus();
    }
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
    ARDMA_ASSIGN_OR_RETURN(CasResult r,
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

int Main(int argc, char** argv) {
  Options opt;
  FlagSet flags("ardma", kUsage);
  opt.Declare(flags);
  flags.Int("region", &opt.region, "N", "region for read/write/cas/fetch-add");
  flags.Bool("hex", &opt.hex, "ARGS/DATA are given, and results printed, as hex");
  flags.Bool("raw", &opt.raw, "read prints raw bytes instead of a hex dump");
  JsonFlag(flags, &opt.json, "stats as one JSON object");
  bool i32 = false, i64 = false, str = false;
  flags.Bool("i32", &i32, "exec: ARGS are 32-bit integers, and so is the result");
  flags.Bool("i64", &i64, "exec: ARGS are 64-bit integers, and so is the result");
  flags.Bool("str", &str, "exec: ARGS are one string (words joined by spaces); the result a string");
  flags.String("kind", &opt.kind, "KIND",
               "load: native (a shared object) or jvm (a .class or .jar)");
  flags.Duration("timeout", &opt.timeout,
                 "per-call timeout, 0 meaning 30s; for lock, how long to wait, 0 meaning for ever");
  flags.Bool("shared", &opt.shared, "lock: take the lock shared (default exclusive)");
  flags.Duration("lease", &opt.lease, "lock: lease, renewed at a third of it while COMMAND runs");
  flags.Duration("lock-wait", &opt.lock_wait,
                 "cluster add/remove/rebalance: how long to wait for a busy lock in a slot to move "
                 "before keeping the slot");
  flags.Int("replicas", &opt.replicas, "N",
            "cluster create: each server's writes also applied on the N servers after it before "
            "they are acknowledged (active mode)");
  flags.Bool("read-from-replica", &opt.read_from_replica,
             "dht get: let a replica of the key's server answer (it may lack a write being "
             "acknowledged right now)");
  flags.Bool("long", &opt.long_list, "fs ls: long listing");
  flags.Bool("parents", &opt.parents, "fs mkdir: make missing parents, accept existing");
  flags.Bool("recursive", &opt.recursive, "fs rm: remove directories and everything below");
  flags.Bool("symbolic", &opt.symbolic, "fs ln: make a symbolic link (required)");
  flags.Short('s', "symbolic");
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
  if (i32 + i64 + str > 1) {
    std::cerr << "ardma: choose one of --i32, --i64 and --str\n";
    return 2;
  }
  opt.typed = i32   ? Options::Typed::kI32
              : i64 ? Options::Typed::kI64
              : str ? Options::Typed::kStr
                    : Options::Typed::kNone;
  if (absl::Status s = opt.Export(); !s.ok()) {
    std::cerr << "ardma: " << s.message() << "\n";
    return 2;
  }
  if (positional[0] == "lock") {
    if (positional.size() < 3) {
      std::cerr << "ardma: usage: ardma lock NAME [--shared] [--timeout S] [--lease S] -- COMMAND [ARGS...]\n";
      return 2;
    }
    if (absl::Status s = lock::CheckLease(opt.lease); !s.ok()) {
      std::cerr << "ardma: --lease: " << s.message() << "\n";
      return 2;
    }
    absl::StatusOr<int> code = RunLocked(
        opt, positional[1], std::vector<std::string>(positional.begin() + 2, positional.end()));
    if (!code.ok()) {
      std::cerr << "ardma: lock '" << positional[1]
                << "': " << absl::StatusCodeToString(code.status().code()) << ": "
                << code.status().message() << "\n";
      return 1;
    }
    return *code;
  }
  absl::Status status = RunCommand(opt, positional);
  if (!status.ok()) {
    bool usage = IsUsage(status);
    std::cerr << "ardma: "
              << (usage ? std::string(status.message())
                        : absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                       status.message()))
              << "\n";
    return usage ? 2 : 1;
  }
  return 0;
}

}  // namespace ardma::cli
