// The tests ardma-bench runs: what one operation of each sends, and how a test is prepared on the
// server (code shipped, table created) before its clock starts.
//
//   ping          PING with a VALUE_SIZE-byte payload (one-sided; the same in both modes)
//   dht.put       put key:NNNNNNNNNNNN -> VALUE_SIZE bytes into table TABLE
//   dht.get       get of such a key (run dht.put first, or the keys are missing: not an error)
//   dht.contains  contains of such a key
//   dht.remove    remove of such a key
//   list.append   append VALUE_SIZE bytes to list "ab-N" (N from the keyspace), walking to its tail
//   lock.acquire  acquire + release of exclusive lock "ardma-bench-key:NNNNNNNNNNNN" (-r 1: one
//                 lock, fully contended); a blocking LockClient per connection in both modes
//   dfs.read      VALUE_SIZE bytes at a key-chosen offset of a 16 MiB DFS file, by file handle
//   dfs.stat      stat of that file by path
//
// Keys are "key:" and 12 digits, as redis-benchmark's -r gives them, drawn from [0, KEYSPACE) by a
// fixed-seed hash of the operation's number, so two runs with the same seed touch the same keys.
// Active mode sends one EXECUTE per operation from an event loop; RDMA mode runs DhtClient's
// one-sided algorithm on a thread per connection.
#ifndef ARDMA_BENCH_WORKLOADS_H_
#define ARDMA_BENCH_WORKLOADS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/load_generator.h"
#include "core/client/client.h"
#include "core/client/invoke.h"

namespace ardma::bench {

struct WorkloadOptions {
  Mode mode = Mode::kActive;
  std::string table = "ardma-bench";
  uint64_t value_size = 3;
  uint64_t keyspace = 10000;  // 0: every operation uses key 0
  uint64_t seed = 1;
  // On a cluster (LoadOptions::addresses): the key numbers each server holds; connection c draws
  // its keys from key_sets[c % size], so every request goes to the key's server (as
  // redis-benchmark --cluster does). Empty: any key on any connection.
  std::vector<std::vector<uint64_t>> key_sets;
  // On a cluster: a client of each server the connections go to, in the order of
  // LoadOptions::addresses (connection c's is servers[c % size]). Empty: the one `setup` server.
  std::vector<Client*> servers;
};

const std::vector<std::string>& KnownTests();

// The key operation `i` on connection `connection` uses: "key:" and 12 digits.
std::string BenchKey(const WorkloadOptions& options, uint64_t i, int connection = 0);
// The key numbered n.
std::string NumberedKey(uint64_t n);

// Prepares `test` on `server` (code shipped, table made), as RunTest does on its `setup`: for the
// other members of a cluster.
absl::Status PrepareTest(std::string_view test, const WorkloadOptions& options, Client& server);

// Prepares `test` through `setup` (a client of the same server) and runs it.
// INVALID_ARGUMENT for an unknown test.
absl::StatusOr<LoadResult> RunTest(std::string_view test, const LoadOptions& load,
                                   const WorkloadOptions& options, Client& setup);

}  // namespace ardma::bench

#endif  // ARDMA_BENCH_WORKLOADS_H_
