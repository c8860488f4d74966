// ardma-bench's load generator and workloads against a real server: every operation is sent and
// answered exactly once, counters are right, errors are counted, a dying server ends the run.
#include "bench/load_generator.h"

#include <set>

#include "absl/synchronization/mutex.h"

#include "bench/workloads.h"
#include "core/cluster/router.h"
#include "core/testing/cluster_fixture.h"
#include "core/testing/run_command.h"
#include "core/testing/test_server.h"
#include "core/wire/frame.h"
#include "core/wire/messages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_mover.h"
#include "services/list/list_client.h"

namespace ardma::bench {
namespace {

using ::testing::HasSubstr;
using testing::StatValue;

class LoadGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    absl::StatusOr<std::unique_ptr<Client>> client = server_->NewClient();
    ASSERT_TRUE(client.ok()) << client.status();
    setup_ = std::move(*client);
  }
  LoadOptions Load(int connections, uint64_t requests, int pipeline = 1) const {
    LoadOptions load;
    load.address = testing::ClientAddress(server_->address());
    load.connections = connections;
    load.requests = requests;
    load.pipeline = pipeline;
    return load;
  }
  uint64_t Stat(std::string_view name) {
    absl::StatusOr<uint64_t> v = StatValue(*setup_, name);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.value_or(0);
  }
  std::set<std::string> DistinctKeys(const WorkloadOptions& w, uint64_t n) {
    std::set<std::string> keys;
    for (uint64_t i = 0; i < n; ++i) keys.insert(BenchKey(w, i));
    return keys;
  }

  std::unique_ptr<testing::TestServer> server_;
  std::unique_ptr<Client> setup_;
};

TEST_F(LoadGeneratorTest, EventLoopSendsAndCompletesEveryRequestOnce) {
  uint64_t pings = Stat("requests.ping");
  std::set<uint64_t> made;
  absl::StatusOr<LoadResult> r =
      RunEventLoop(Load(4, 1000, 3), [&made](uint64_t i, int, std::string* out) {
        made.insert(i);
        out->append(std::string(i % 7, 'p'));
        return wire::Op::kPing;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1000u);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_EQ(made.size(), 1000u);
  EXPECT_EQ(*made.rbegin(), 999u);
  EXPECT_EQ(Stat("requests.ping"), pings + 1000);
  ASSERT_EQ(r->latency_ns.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(r->latency_ns.begin(), r->latency_ns.end()));
  EXPECT_LE(r->PercentileMs(50), r->PercentileMs(99));
  EXPECT_EQ(r->PercentileMs(100), static_cast<double>(r->latency_ns.back()) / 1e6);
  EXPECT_EQ(r->RoundTripsPerOp(), 1.0);
  uint64_t payload = 0;
  for (uint64_t i = 0; i < 1000; ++i) payload += i % 7;
  EXPECT_EQ(r->bytes, 2 * (1000 * wire::kHeaderSize + payload));  // echoed both ways
}

TEST_F(LoadGeneratorTest, SeveralEventLoopsShareTheRunAndSendEveryRequestOnce) {
  uint64_t pings = Stat("requests.ping");
  absl::Mutex mu;
  std::multiset<uint64_t> made;
  std::set<int> connections;
  LoadOptions load = Load(5, 1001, 2);
  load.threads = 3;
  absl::StatusOr<LoadResult> r =
      RunEventLoop(load, [&](uint64_t i, int connection, std::string* out) {
        absl::MutexLock lock(&mu);
        made.insert(i);
        connections.insert(connection);
        out->append(std::string(i % 7, 'p'));
        return wire::Op::kPing;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1001u);
  EXPECT_EQ(r->errors, 0u);
  ASSERT_EQ(made.size(), 1001u);
  EXPECT_EQ(std::set<uint64_t>(made.begin(), made.end()).size(), 1001u);  // each once
  EXPECT_EQ(*made.rbegin(), 1000u);
  EXPECT_EQ(connections, (std::set<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Stat("requests.ping"), pings + 1001);
  ASSERT_EQ(r->latency_ns.size(), 1001u);
  EXPECT_TRUE(std::is_sorted(r->latency_ns.begin(), r->latency_ns.end()));
  uint64_t payload = 0;
  for (uint64_t i = 0; i < 1001; ++i) payload += i % 7;
  EXPECT_EQ(r->bytes, 2 * (1001 * wire::kHeaderSize + payload));
  load.threads = 0;
  EXPECT_EQ(RunEventLoop(load, [](uint64_t, int, std::string*) { return wire::Op::kPing; })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LoadGeneratorTest, ServerErrorsAreCountedNotFatal) {
  absl::StatusOr<LoadResult> r = RunEventLoop(Load(2, 50), [](uint64_t, int, std::string* out) {
    wire::EncodeExecuteRequest({.function = "no.such_function"}, out);
    return wire::Op::kExecute;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 50u);
  EXPECT_EQ(r->errors, 50u);
  EXPECT_THAT(r->first_error, HasSubstr("NOT_FOUND"));
}

TEST_F(LoadGeneratorTest, AServerThatGoesAwayEndsTheRunWithUnavailable) {
  absl::StatusOr<LoadResult> r = RunEventLoop(Load(3, 100000), [this](uint64_t i, int, std::string*) {
    if (i == 300) server_->server().Stop();
    return wire::Op::kPing;
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST_F(LoadGeneratorTest, BadOptionsAndUnreachableServers) {
  LoadOptions none = Load(0, 10);
  auto ping = [](uint64_t, int, std::string*) { return wire::Op::kPing; };
  EXPECT_EQ(RunEventLoop(none, ping).status().code(), absl::StatusCode::kInvalidArgument);
  LoadOptions nowhere = Load(1, 10);
  nowhere.address = "unix:/nonexistent/ardmad.sock";
  EXPECT_EQ(RunEventLoop(nowhere, ping).status().code(), absl::StatusCode::kUnavailable);
  WorkloadOptions w;
  EXPECT_EQ(RunTest("dht.frob", Load(1, 10), w, *setup_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LoadGeneratorTest, KeysAreDeterministicAndInTheKeyspace) {
  WorkloadOptions w;
  w.keyspace = 100;
  EXPECT_EQ(BenchKey(w, 5), BenchKey(w, 5));
  EXPECT_THAT(BenchKey(w, 5), ::testing::MatchesRegex("key:0000000000[0-9][0-9]"));
  EXPECT_GT(DistinctKeys(w, 1000).size(), 90u);  // spread over the keyspace
  w.seed = 2;
  WorkloadOptions other = w;
  other.seed = 3;
  int same = 0;
  for (uint64_t i = 0; i < 100; ++i) same += BenchKey(w, i) == BenchKey(other, i);
  EXPECT_LT(same, 20);
  w.keyspace = 0;
  EXPECT_EQ(BenchKey(w, 123), "key:000000000000");
}

TEST_F(LoadGeneratorTest, DhtPutThenGetInBothModesStoreAndFindTheKeys) {
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    SCOPED_TRACE(ModeName(mode));
    WorkloadOptions w;
    w.mode = mode;
    w.table = std::string("bench-") + ModeName(mode);
    w.keyspace = 64;
    w.value_size = 10;
    uint64_t executes = Stat("requests.execute");
    absl::StatusOr<LoadResult> put = RunTest("dht.put", Load(3, 300), w, *setup_);
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_EQ(put->completed, 300u);
    EXPECT_EQ(put->errors, 0u) << put->first_error;
    dht::DhtClient check(setup_.get(), Mode::kActive);
    std::set<std::string> keys = DistinctKeys(w, 300);
    EXPECT_EQ(*check.Size(w.table), keys.size());
    EXPECT_EQ(*check.Get(w.table, *keys.begin()), std::string(10, 'x'));
    absl::StatusOr<LoadResult> get = RunTest("dht.get", Load(2, 200), w, *setup_);
    ASSERT_TRUE(get.ok()) << get.status();
    EXPECT_EQ(get->errors, 0u) << get->first_error;
    if (mode == Mode::kActive) {
      // One EXECUTE per operation, plus the set-up's (per run: dht.open to make the table, and
      // again to resolve it) and this test's own calls (its client resolves the table once).
      EXPECT_EQ(put->RoundTripsPerOp(), 1.0);
      EXPECT_EQ(Stat("requests.execute") - executes,
                300u + 200u + 2u * 2u /*set-up*/ + 1u /*resolve*/ + 2u /*size, get*/);
    } else {
      EXPECT_GT(put->RoundTripsPerOp(), 2.0);  // lock, slot CAS, unlock, entry allocation...
      EXPECT_LE(get->RoundTripsPerOp(), 2.0);  // neighbourhood READ, entry READ
      EXPECT_GE(get->RoundTripsPerOp(), 1.0);
    }
  }
}

TEST_F(LoadGeneratorTest, ListAppendGrowsTheListsInBothModes) {
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    SCOPED_TRACE(ModeName(mode));
    WorkloadOptions w;
    w.mode = mode;
    w.keyspace = 0;  // one list: "ab-0"
    w.value_size = 5;
    list::ListClient lists(setup_.get(), Mode::kActive);
    uint64_t before = lists.Size("ab-0").value_or(0);
    absl::StatusOr<LoadResult> r = RunTest("list.append", Load(2, 40), w, *setup_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->errors, 0u) << r->first_error;
    EXPECT_EQ(*lists.Size("ab-0"), before + 40);
    if (mode == Mode::kActive) {
      EXPECT_EQ(r->RoundTripsPerOp(), 1.0);
    }
  }
}

TEST_F(LoadGeneratorTest, LockAndFileSystemTestsInBothModes) {
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    SCOPED_TRACE(ModeName(mode));
    WorkloadOptions w;
    w.mode = mode;
    w.keyspace = 1;  // one lock: every acquire contends
    w.value_size = 4096;
    absl::StatusOr<LoadResult> locks = RunTest("lock.acquire", Load(3, 150), w, *setup_);
    ASSERT_TRUE(locks.ok()) << locks.status();
    EXPECT_EQ(locks->completed, 150u);
    EXPECT_EQ(locks->errors, 0u) << locks->first_error;
    absl::StatusOr<LoadResult> reads = RunTest("dfs.read", Load(2, 100), w, *setup_);
    ASSERT_TRUE(reads.ok()) << reads.status();
    EXPECT_EQ(reads->errors, 0u) << reads->first_error;
    absl::StatusOr<LoadResult> stats = RunTest("dfs.stat", Load(2, 100), w, *setup_);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->errors, 0u) << stats->first_error;
    if (mode == Mode::kActive) {
      EXPECT_EQ(locks->RoundTripsPerOp(), 2.0);  // acquire (parks when busy) + release
      EXPECT_EQ(reads->RoundTripsPerOp(), 1.0);
      EXPECT_GT(reads->BytesPerOp(), 4096.0);
      EXPECT_EQ(stats->RoundTripsPerOp(), 1.0);
    } else {
      EXPECT_EQ(reads->RoundTripsPerOp(), 4.0);  // inode, table, data, generation check
      EXPECT_GT(locks->RoundTripsPerOp(), 5.0);
    }
  }
}

TEST_F(LoadGeneratorTest, CommandLineRunsTestsAndRejectsBadFlags) {
  std::string bench = testing::BinDir() + "/ardma-bench --server " +
                      testing::ClientAddress(server_->address()) + " ";
  std::string out;
  EXPECT_EQ(testing::RunCommand(bench + "-t ping,dht.put -c 3 -n 200 -d 5 --json", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("\"test\": \"dht.put\""));
  EXPECT_THAT(out, HasSubstr("\"operations\": 200"));
  EXPECT_EQ(testing::RunCommand(bench + "-t dht.get -n 50 --csv --mode rdma -c 2", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("dht.get,rdma,2,1,3,50,"));
  EXPECT_EQ(testing::RunCommand(bench + "-t dht.get -n 10 -P 4", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("round trips/op 1.00"));
  EXPECT_EQ(testing::RunCommand(bench + "-t dht.frob", &out), 2);
  EXPECT_THAT(out, HasSubstr("unknown test 'dht.frob'"));
  EXPECT_EQ(testing::RunCommand(bench + "-c 0", &out), 2);
  EXPECT_EQ(testing::RunCommand(bench + "--mode rdma -P 2", &out), 2);
  EXPECT_EQ(
      testing::RunCommand(bench + "--table " + std::string(60, 'n') + " -t dht.put -n 1", &out), 1);
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_EQ(testing::RunCommand(testing::BinDir() + "/ardma-bench --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("-P, --pipeline N"));
}

// On a cluster each connection sends only the keys its member holds: every put lands, with no
// redirect, on the server the map names; both modes; other tests are refused.
TEST(LoadGeneratorClusterTest, DhtTestsRunOnAClusterEachKeyToItsServer) {
  testing::ClusterFixture fixture(3);
  ASSERT_TRUE(fixture.ok()) << fixture.why();
  std::string bench = testing::BinDir() + "/ardma-bench --server " + fixture.address() +
                      (testing::TestTransport().rfind("ucx", 0) == 0 ? " --ucx " : " ");
  std::string out;
  EXPECT_EQ(testing::RunCommand(bench + "-t dht.put,dht.get -c 6 -n 3000 -r 600 --csv", &out), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("dht.put,active,6,1,3,3000,"));
  EXPECT_THAT(out, ::testing::EndsWith(",0\n"));  // no errors
  EXPECT_EQ(testing::RunCommand(bench + "-t dht.get --mode rdma -c 3 -n 600 -r 600 --csv", &out),
            0)
      << out;
  EXPECT_EQ(testing::RunCommand(bench + "-t ping", &out), 2);
  EXPECT_THAT(out, HasSubstr("only the dht.* tests"));
  absl::StatusOr<std::unique_ptr<cluster::Cluster>> routed = fixture.ConnectOverTestTransport();
  ASSERT_TRUE(routed.ok());
  std::vector<std::unique_ptr<Client>> direct = fixture.ClientOfEachServer();
  for (int s = 0; s < 3; ++s) {
    absl::StatusOr<std::vector<std::string>> held = dht::KeysOf(*direct[s], "ardma-bench");
    ASSERT_TRUE(held.ok()) << held.status();
    // Every member got puts (2 of the 6 connections each), and only keys of its own slots.
    EXPECT_FALSE(held->empty()) << "s" << s;
    for (const std::string& key : *held) {
      EXPECT_EQ((*routed)->map()->Owner(slots::SlotOf("ardma-bench", key)), absl::StrCat("s", s));
    }
  }
}

}  // namespace
}  // namespace ardma::bench
