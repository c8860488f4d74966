#include "bench/workloads.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/wire/messages.h"
#include "services/dht/dht_client.h"
#include "services/dfs/dfs_client.h"
#include "services/dht/dht_format.h"
#include "services/list/list_client.h"
#include "services/lock/lock_client.h"
#include "services/stable_hash.h"

namespace ardma::bench {
namespace {

enum class DhtOp { kPut, kGet, kContains, kRemove };

std::string_view FunctionName(DhtOp op) {
  switch (op) {
    case DhtOp::kPut:
      return "dht.put";
    case DhtOp::kGet:
      return "dht.get";
    case DhtOp::kContains:
      return "dht.contains";
    case DhtOp::kRemove:
      return "dht.remove";
  }
  return "";
}

absl::StatusOr<DhtOp> ParseDhtOp(std::string_view test) {
  for (DhtOp op : {DhtOp::kPut, DhtOp::kGet, DhtOp::kContains, DhtOp::kRemove}) {
    if (FunctionName(op) == test) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown test '", ToAbsl(test),
                                                 "' (known: ", absl::StrJoin(KnownTests(), ","),
                                                 ")"));
}

// Ships the dht library and creates the table, so no timed operation pays for either.
absl::Status PrepareDht(const WorkloadOptions& options, Client& setup) {
  ARDMA_RETURN_IF_ERROR(dht::CheckName(options.table));
  ARDMA_RETURN_IF_ERROR(EnsureLoaded(setup, active_libraries::dht()));
  std::string args;
  wire::ByteWriter(&args).Str16(options.table);
  return Invoke(setup, Mode::kActive, active_libraries::dht(), "dht.open", args).status();
}

absl::StatusOr<LoadResult> RunDht(DhtOp op, const LoadOptions& load,
                                  const WorkloadOptions& options, Client& setup) {
  ARDMA_RETURN_IF_ERROR(PrepareDht(options, setup));
  const std::string value(options.value_size, 'x');
  if (options.mode == Mode::kActive) {
    // Every request is EXECUTE(dht library by hash, function, the table as resolved on the
    // connection's server + key [+ value]), exactly what DhtClient sends in active mode.
    std::vector<dht::CachedTable> tables;
    const std::vector<Client*> servers =
        options.servers.empty() ? std::vector<Client*>{&setup} : options.servers;
    for (Client* server : servers) {
      ARDMA_ASSIGN_OR_RETURN(tables.emplace_back(),
                             dht::OpenTable(*server, options.table, /*create=*/true));
    }
    const wire::CodeHash hash = active_libraries::dht().hash();
    LoadOptions sent = load;
    sent.idempotent = op == DhtOp::kGet || op == DhtOp::kContains;  // reads: no retry record
    return RunEventLoop(sent, [&, op](uint64_t i, int connection, std::string* out) {
      std::string key = BenchKey(options, i, connection);
      const std::string_view key_view = key;
      std::string args;
      dht::EncodeTarget(dht::CachedTarget(options.table, tables[connection % tables.size()],
                                          &key_view),
                        &args);
      args += op == DhtOp::kPut ? dht::EncodePutArgs(key, value) : dht::EncodeKeyArgs(key);
      wire::EncodeExecuteRequest(
          {.by_hash = true, .hash = hash, .function = FunctionName(op), .args = args}, out);
      return wire::Op::kExecute;
    });
  }
  return RunThreads(load, [&, op](Client& client, int connection) -> absl::StatusOr<ThreadOp> {
    auto table = std::make_shared<dht::DhtClient>(&client, Mode::kRdma);
    ARDMA_RETURN_IF_ERROR(table->Size(options.table).status());  // caches the table's geometry
    return ThreadOp([&, op, table, connection](uint64_t i) -> absl::Status {
      std::string key = BenchKey(options, i, connection);
      switch (op) {
        case DhtOp::kPut:
          return table->Put(options.table, key, value).status();
        case DhtOp::kGet: {
          absl::Status s = table->Get(options.table, key).status();
          return absl::IsNotFound(s) ? absl::OkStatus() : s;  // a missing key is an answer
        }
        case DhtOp::kContains:
          return table->Contains(options.table, key).status();
        case DhtOp::kRemove:
          return table->Remove(options.table, key).status();
      }
      return absl::OkStatus();
    });
  });
}

// lock.acquire: acquire + release of lock "ardma-bench-<key>" (exclusive, 10 s lease), a blocking
// LockClient per connection in both modes (an acquire may wait, so it is not an event-loop op).
absl::StatusOr<LoadResult> RunLock(const LoadOptions& load, const WorkloadOptions& options) {
  return RunThreads(load, [&](Client& client, int) -> absl::StatusOr<ThreadOp> {
    auto locks = std::make_shared<lock::LockClient>(&client, options.mode);
    ARDMA_ASSIGN_OR_RETURN(lock::Grant g, locks->Acquire("ardma-bench-warm", lock::LockMode::kExclusive,
                                                         absl::Seconds(30)));
    ARDMA_RETURN_IF_ERROR(locks->Release(g));
    return ThreadOp([&, locks](uint64_t i) -> absl::Status {
      std::string name = absl::StrCat("ardma-bench-", BenchKey(options, i));
      ARDMA_ASSIGN_OR_RETURN(lock::Grant grant,
                             locks->Acquire(name, lock::LockMode::kExclusive, absl::Seconds(60)));
      return locks->Release(grant);
    });
  });
}

// list.append: appends VALUE_SIZE bytes to list "ab-<key index>" (walking to its tail, as the
// Active RDMA paper's append does), so each list grows by requests / keyspace elements.
absl::StatusOr<LoadResult> RunList(const LoadOptions& load, const WorkloadOptions& options,
                                   Client& setup) {
  const std::string value(options.value_size, 'l');
  auto name = [&](uint64_t i) {
    uint64_t n = options.keyspace == 0 ? 0 : MixBits(i ^ MixBits(options.seed)) % options.keyspace;
    return absl::StrCat("ab-", n);
  };
  if (options.mode == Mode::kActive) {
    ARDMA_RETURN_IF_ERROR(EnsureLoaded(setup, active_libraries::list()));
    const wire::CodeHash hash = active_libraries::list().hash();
    return RunEventLoop(load, [&](uint64_t i, int, std::string* out) {
      std::string list = name(i), args;
      list::EncodeTarget(list::Target{list}, &args);
      list::EncodeValue(list::ListValue(value), &args);
      wire::EncodeExecuteRequest(
          {.by_hash = true, .hash = hash, .function = "list.append", .args = args}, out);
      return wire::Op::kExecute;
    });
  }
  return RunThreads(load, [&](Client& client, int) -> absl::StatusOr<ThreadOp> {
    auto lists = std::make_shared<list::ListClient>(&client, Mode::kRdma);
    return ThreadOp([&, lists](uint64_t i) -> absl::Status {
      return lists->Append(name(i), list::ListValue(value));
    });
  });
}

constexpr uint64_t kDfsFileBytes = 16u << 20;

// dfs.read: VALUE_SIZE bytes at a key-chosen offset of a 16 MiB file, by file handle.
// dfs.stat: stat of that file by path. Both one request per operation in active mode.
absl::StatusOr<LoadResult> RunDfs(std::string_view test, const LoadOptions& load,
                                  const WorkloadOptions& options, Client& setup) {
  const std::string path = "/ardma-bench.data";
  dfs::DfsClient fs(&setup, Mode::kActive);
  absl::StatusOr<uint64_t> len = fs.GetLen(path);
  if (!len.ok() || *len != kDfsFileBytes) {
    ARDMA_RETURN_IF_ERROR(fs.WriteFile(path, std::string(kDfsFileBytes, 'd')));
  }
  ARDMA_ASSIGN_OR_RETURN(dfs::FileHandle file, fs.Open(path));
  uint64_t size = std::clamp<uint64_t>(options.value_size, 1, kDfsFileBytes);
  auto offset = [&](uint64_t i) {
    return (MixBits(i ^ MixBits(options.seed)) % (kDfsFileBytes - size + 1));
  };
  bool read = test == "dfs.read";
  if (options.mode == Mode::kActive) {
    ARDMA_RETURN_IF_ERROR(EnsureLoaded(setup, active_libraries::dfs()));
    const wire::CodeHash hash = active_libraries::dfs().hash();
    return RunEventLoop(load, [&, read](uint64_t i, int, std::string* out) {
      std::string args;
      wire::ByteWriter w(&args);
      if (read) {
        w.U64(file.sb);
        w.U64(file.ino);
        w.U64(offset(i));
        w.U64(size);
      } else {
        w.Str16("default");
        w.Str16(path);
      }
      wire::EncodeExecuteRequest({.by_hash = true,
                                  .hash = hash,
                                  .function = read ? "dfs.pread" : "dfs.stat",
                                  .args = args},
                                 out);
      return wire::Op::kExecute;
    });
  }
  return RunThreads(load, [&, read](Client& client, int) -> absl::StatusOr<ThreadOp> {
    auto rfs = std::make_shared<dfs::DfsClient>(&client, Mode::kRdma);
    return ThreadOp([&, read, rfs](uint64_t i) -> absl::Status {
      if (read) return rfs->ReadAt(file, offset(i), size).status();
      return rfs->Lookup(path).status();
    });
  });
}

}  // namespace

const std::vector<std::string>& KnownTests() {
  static const std::vector<std::string> tests = {"ping",         "dht.put",    "dht.get",
                                                 "dht.contains", "dht.remove", "list.append",
                                                 "lock.acquire", "dfs.read",   "dfs.stat"};
  return tests;
}

std::string BenchKey(const WorkloadOptions& options, uint64_t i, int connection) {
  uint64_t n = options.keyspace == 0 ? 0 : MixBits(i ^ MixBits(options.seed)) % options.keyspace;
  if (!options.key_sets.empty()) {
    const std::vector<uint64_t>& keys = options.key_sets[connection % options.key_sets.size()];
    n = keys.empty() ? 0 : keys[MixBits(i ^ MixBits(options.seed)) % keys.size()];
  }
  return NumberedKey(n);
}

std::string NumberedKey(uint64_t n) {
  char key[32];
  std::snprintf(key, sizeof(key), "key:%012" PRIu64, n);
  return key;
}

absl::Status PrepareTest(std::string_view test, const WorkloadOptions& options, Client& server) {
  ARDMA_RETURN_IF_ERROR(ParseDhtOp(test).status());
  return PrepareDht(options, server);
}

absl::StatusOr<LoadResult> RunTest(std::string_view test, const LoadOptions& load,
                                   const WorkloadOptions& options, Client& setup) {
  if (test == "ping") {
    const std::string payload(options.value_size, 'x');
    return RunEventLoop(load, [&payload](uint64_t, int, std::string* out) {
      out->append(payload);
      return wire::Op::kPing;
    });
  }
  if (test == "lock.acquire") return RunLock(load, options);
  if (test == "list.append") return RunList(load, options, setup);
  if (test == "dfs.read" || test == "dfs.stat") return RunDfs(test, load, options, setup);
  ARDMA_ASSIGN_OR_RETURN(DhtOp op, ParseDhtOp(test));
  return RunDht(op, load, options, setup);
}

}  // namespace ardma::bench
