#include "bench/workloads.h"

#include <cinttypes>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"
#include "core/wire/messages.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_format.h"
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
    // Every request is EXECUTE(dht library by hash, function, target by name + key [+ value]),
    // exactly what DhtClient sends in active mode.
    std::string target;
    dht::EncodeTarget(dht::Target{options.table}, &target);
    const wire::CodeHash hash = active_libraries::dht().hash();
    return RunEventLoop(load, [&, op](uint64_t i, std::string* out) {
      std::string key = BenchKey(options, i);
      std::string args = target;
      args += op == DhtOp::kPut ? dht::EncodePutArgs(key, value) : dht::EncodeKeyArgs(key);
      wire::EncodeExecuteRequest(
          {.by_hash = true, .hash = hash, .function = FunctionName(op), .args = args}, out);
      return wire::Op::kExecute;
    });
  }
  return RunThreads(load, [&, op](Client& client) -> absl::StatusOr<ThreadOp> {
    auto table = std::make_shared<dht::DhtClient>(&client, Mode::kRdma);
    ARDMA_RETURN_IF_ERROR(table->Size(options.table).status());  // caches the table's geometry
    return ThreadOp([&, op, table](uint64_t i) -> absl::Status {
      std::string key = BenchKey(options, i);
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

}  // namespace

const std::vector<std::string>& KnownTests() {
  static const std::vector<std::string> tests = {"ping", "dht.put", "dht.get", "dht.contains",
                                                      "dht.remove"};
  return tests;
}

std::string BenchKey(const WorkloadOptions& options, uint64_t i) {
  uint64_t n = options.keyspace == 0 ? 0 : MixBits(i ^ MixBits(options.seed)) % options.keyspace;
  char key[32];
  std::snprintf(key, sizeof(key), "key:%012" PRIu64, n);
  return key;
}

absl::StatusOr<LoadResult> RunTest(std::string_view test, const LoadOptions& load,
                                   const WorkloadOptions& options, Client& setup) {
  if (test == "ping") {
    const std::string payload(options.value_size, 'x');
    return RunEventLoop(load, [&payload](uint64_t, std::string* out) {
      out->append(payload);
      return wire::Op::kPing;
    });
  }
  ARDMA_ASSIGN_OR_RETURN(DhtOp op, ParseDhtOp(test));
  return RunDht(op, load, options, setup);
}

}  // namespace ardma::bench
