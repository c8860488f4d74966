// The admin CLI `ardma` as a library the tests use (ardma_main.cc is the thin main): global
// options, the raw commands (ping, stats, load, has, exec, read, write, cas, fetch-add; here),
// `ardma fs` (ardma_fs.cc) and `ardma lock` (ardma_lock.cc).
#ifndef ARDMA_TOOLS_ARDMA_CLI_H_
#define ARDMA_TOOLS_ARDMA_CLI_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cli/client_flags.h"
#include "core/client/servers.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/member.h"
#include "services/lock/lock_format.h"

namespace ardma::cli {

extern const char kUsage[];

// The flags; --server, --auth-file, TLS, --fs (for fs) and --mode (for fs) in DfsFlags.
struct Options : DfsFlags {
  int64_t region = 0;
  bool hex = false;
  bool raw = false;
  bool json = false;  // stats: one JSON object instead of aligned lines
  // exec: ARGS are decimal 32- or 64-bit integers (little-endian on the wire, as Java's int[] and
  // long[] helpers read them) or one string, and the result is printed the same way.
  enum class Typed { kNone, kI32, kI64, kStr };
  Typed typed = Typed::kNone;
  absl::Duration timeout = absl::ZeroDuration();  // unset: 30 s per call; lock: wait for ever
  bool shared = false;
  absl::Duration lease = lock::kDefaultLease;
  // cluster add/remove/rebalance: how long a lock in a slot to move may stay busy before the slot
  // is kept where it is.
  absl::Duration lock_wait = absl::Seconds(5);
  int64_t replicas = 0;  // cluster create --replicas
  bool read_from_replica = false;  // dht get: a replica of the key's owner may answer
  bool long_list = false;
  bool parents = false;
  bool recursive = false;
  bool symbolic = false;
  std::string kind;  // load: native or jvm; empty: from the file name
};

inline constexpr absl::Duration kDefaultCallTimeout = absl::Seconds(30);

// Parses the flags and runs the command; returns the exit status (0 success, 1 the server
// answered with an error, 2 bad usage; `lock` returns its COMMAND's).
int Main(int argc, char** argv);

// A usage error (exit status 2) and its test.
absl::Status Usage(const std::string& message);
// exec's typed arguments: `values` as little-endian i32/i64 (decimal, may be negative), or the
// strings joined by spaces for kStr. A usage error for a value that is not such a number.
absl::StatusOr<std::string> EncodeTyped(Options::Typed typed, const std::vector<std::string>& values);
// The result as the same type: "3 -4 5"; a usage-free INVALID_ARGUMENT if its length is not a
// whole number of values.
absl::StatusOr<std::string> FormatTyped(Options::Typed typed, std::string_view bytes);
bool IsUsage(const absl::Status& status);

// Decimal or 0x-prefixed hex.
absl::StatusOr<uint64_t> ParseNumber(const std::string& text);
// Pairs of hex digits to bytes.
absl::StatusOr<std::string> ParseHex(const std::string& text);
// 16 bytes a line: address, hex, printable characters.
std::string HexDump(std::string_view bytes, uint64_t base);

// `ardma COMMAND ...` for every command but lock; `args` starts with the command's name.
absl::Status RunCommand(const Options& opt, const std::vector<std::string>& args);
// `ardma fs SUBCOMMAND ...`; `args` starts with "fs".
absl::Status RunFsCommand(const Options& opt, const std::vector<std::string>& args);
// `ardma dht get|put|insert|del|size ...` (ardma_dht.cc), on a server or a cluster.
absl::Status RunDhtCommand(const Options& opt, const std::vector<std::string>& args);
// `ardma cluster add ID | remove ID | rebalance | fix` (ardma_rebalance.cc): slots moved between
// the servers of the cluster at `where` while clients run, or the fences repaired. A slot holding
// a lock that stays busy for `lock_wait` is kept.
absl::Status RunRebalance(cluster::EtcdClient& etcd, const cluster::ClusterAddress& where,
                          const std::vector<std::string>& args, absl::Duration lock_wait);
// The service clients' Servers for --server: one server, or (etcd://...) a cluster; with
// --timeout as the calls' timeout.
absl::StatusOr<std::unique_ptr<Servers>> ConnectServices(const Options& opt);
// `ardma list push|pop|len|range ...` (ardma_list.cc), on a server or a cluster.
absl::Status RunListCommand(const Options& opt, const std::vector<std::string>& args);
// `ardma cluster create|status` (ardma_cluster.cc), with --server etcd://HOST:PORT/NAME.
absl::Status RunClusterCommand(const Options& opt, const std::vector<std::string>& args);
// `ardma cc status` (ardma_cc_status.cc).
absl::Status RunCcCommand(const Options& opt, const std::vector<std::string>& args);
// `ardma lock NAME -- COMMAND...`: runs COMMAND holding the lock; returns its exit status.
absl::StatusOr<int> RunLocked(const Options& opt, const std::string& name,
                              const std::vector<std::string>& command);

}  // namespace ardma::cli

#endif  // ARDMA_TOOLS_ARDMA_CLI_H_
