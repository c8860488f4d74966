// End-to-end tests of ardmad's core: a real Server on 127.0.0.1:0, real Clients.
#include "core/server/server.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/testing/raw_socket.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;
using testing::RawSocket;
using testing::U64At;
using testing::U64s;

constexpr uint64_t kScratch = heap::kDataStart + (1 << 20);  // free of heap blocks in these tests

ServerOptions TestOptions() { return testing::TestServerOptions(); }

uint64_t Stat(Client& client, const std::string& name) {
  absl::StatusOr<std::vector<wire::StatsEntry>> stats = client.Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  if (!stats.ok()) return 0;
  for (const auto& [n, v] : *stats) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no stat " << name;
  return 0;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(TestOptions()); }
  void StartServer(const ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = NewClient();
  }
  // Stops the server and starts a fresh one (empty memory, no code) on the same port; clients
  // keep their broken connections until their next call.
  void RestartOnSamePort() {
    uint16_t port = server_->port();
    server_.reset();
    ServerOptions options = TestOptions();
    options.listen = "127.0.0.1:" + std::to_string(port);
    absl::StatusOr<std::unique_ptr<Server>> again = Server::Start(options);
    ASSERT_TRUE(again.ok()) << again.status();
    server_ = std::move(*again);
  }
  std::unique_ptr<Client> NewClient(ClientOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Client>> c =
        Client::Connect(testing::ClientAddress(server_->address()), options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ServerTest, PingEchoesAndStatsCount) {
  ASSERT_TRUE(client_->Ping().ok());
  EXPECT_EQ(*client_->Echo("hello"), "hello");
  std::string big(1 << 20, 'z');
  EXPECT_EQ(*client_->Echo(big), big);
  EXPECT_EQ(Stat(*client_, "requests.ping"), 3u);
  EXPECT_GE(Stat(*client_, "connections.open"), 1u);
}

TEST_F(ServerTest, ReadWriteAndBatchesAreOneRoundTrip) {
  ASSERT_TRUE(client_->Write(kScratch, "0123456789").ok());
  EXPECT_EQ(*client_->Read(kScratch + 2, 5), "23456");

  uint64_t before = client_->counters().round_trips.load();
  absl::StatusOr<Batch::Result> r = client_->Batch()
                                        .Write(kScratch + 100, "abc")
                                        .Write(kScratch + 200, "def")
                                        .Read(kScratch + 100, 3)
                                        .Read(kScratch + 200, 3)
                                        .FetchAdd(kScratch + 304, 5)
                                        .CompareAndSwap(kScratch + 304, 5, 9)
                                        .Read(kScratch + 304, 8)
                                        .Send();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(client_->counters().round_trips.load() - before, 1u);
  ASSERT_EQ(r->reads.size(), 3u);
  EXPECT_EQ(r->reads[0], "abc");  // the writes, earlier in the batch, are visible
  EXPECT_EQ(r->reads[1], "def");
  EXPECT_EQ(U64At(r->reads[2], 0), 9u);
  EXPECT_EQ(r->fetch_adds[0], 0u);
  EXPECT_TRUE(r->cas[0].swapped);
}

TEST_F(ServerTest, ReadIntoFillsTheCallersBuffersInOneRoundTrip) {
  ASSERT_TRUE(client_->Write(kScratch, "0123456789abcdef").ok());
  char one[4], two[6];
  std::array<ReadOp, 2> ops = {ReadOp{kScratch + 2, one}, ReadOp{kScratch + 10, two}};
  uint64_t before = client_->counters().round_trips.load();
  ASSERT_TRUE(client_->ReadInto(ops).ok());
  EXPECT_EQ(client_->counters().round_trips.load() - before, 1u);
  EXPECT_EQ(std::string_view(one, 4), "2345");
  EXPECT_EQ(std::string_view(two, 6), "abcdef");
  ASSERT_TRUE(client_->ReadInto(std::span(ops).first(1)).ok());  // one READ alone
  EXPECT_EQ(client_->counters().round_trips.load() - before, 2u);
  // The errors a READ gets, for the whole batch; the buffers of a refused batch are not touched.
  char last[8] = "keepme!";
  std::array<ReadOp, 2> bad = {ReadOp{kScratch, one}, ReadOp{(64 << 20) - 4, last}};
  EXPECT_EQ(client_->ReadInto(bad).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(std::string_view(last), "keepme!");
  std::array<ReadOp, 1> elsewhere = {ReadOp{0, one, /*region=*/5}};
  EXPECT_EQ(client_->ReadInto(elsewhere).code(), absl::StatusCode::kNotFound);
  std::string huge(100 << 20, '\0');
  std::array<ReadOp, 1> too_big = {ReadOp{0, huge}};
  EXPECT_EQ(client_->ReadInto(too_big).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(client_->ReadInto({}).ok());
}

TEST_F(ServerTest, BoundsAlignmentAndLimitErrors) {
  EXPECT_EQ(client_->Read((64 << 20) - 4, 8).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client_->Write(~0ull - 1, "xy").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client_->CompareAndSwap(kScratch + 3, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->FetchAdd(kScratch + 4, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Read(0, 8, /*region=*/5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Read(0, 100 << 20).status().code(), absl::StatusCode::kResourceExhausted);
  // A batch with one bad entry changes nothing.
  ASSERT_TRUE(client_->Write(kScratch, "keep").ok());
  EXPECT_FALSE(client_->Batch().Write(kScratch, "lost").Write(~0ull - 8, "bad").Send().ok());
  EXPECT_EQ(*client_->Read(kScratch, 4), "keep");
  // Over TCP the server refused them all, and counted them; over UCX the client refuses one-sided
  // operations itself, with the same errors, before anything reaches the server.
  if (testing::TestTransport() == "tcp") {
    EXPECT_GE(Stat(*client_, "errors"), 7u);
  }
  EXPECT_TRUE(client_->Ping().ok());
}

TEST_F(ServerTest, ConcurrentFetchAddFromSeveralClientsSumsExactly) {
  constexpr int kClients = 4, kAdds = 1000;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      std::unique_ptr<Client> client = NewClient();
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(client->FetchAdd(kScratch + 8, 3).ok());
    });
  }
  // And several threads sharing one client (pipelined on one connection).
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(client_->FetchAdd(kScratch + 8, 3).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(U64At(*client_->Read(kScratch + 8, 8), 0), 3u * kAdds * (kClients + 2));
}

// A closed loop driven from callbacks: each response issues the next request from the client's
// own thread, and every result arrives in order.
TEST_F(ServerTest, ExecuteAsyncCallbacksCanChainCalls) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  std::promise<void> finished;
  std::vector<std::string> results;
  std::function<void(int)> issue = [&](int i) {
    client_->ExecuteAsync("test.echo", std::to_string(i), [&, i](ResponsePayload r) {
      results.push_back(r.ok() ? *r : r.status().ToString());
      if (i < 20) {
        issue(i + 1);
      } else {
        finished.set_value();
      }
    });
  };
  issue(0);
  ASSERT_EQ(finished.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ASSERT_EQ(results.size(), 21u);
  for (int i = 0; i <= 20; ++i) EXPECT_EQ(results[i], std::to_string(i));
  // A bad name fails through the callback, not by throwing or hanging.
  std::promise<absl::Status> bad;
  client_->ExecuteAsync("", "", [&](ResponsePayload r) { bad.set_value(r.status()); });
  EXPECT_EQ(bad.get_future().get().code(), absl::StatusCode::kInvalidArgument);
}

// The hash the build embeds with a library's bytes is theirs (the client ships by it).
TEST(ActiveLibraryTest, TheEmbeddedHashIsTheCodesSha256) {
  for (const ActiveLibrary* library : {&active_libraries::test(), &active_libraries::test2()}) {
    EXPECT_EQ(library->hash(), Sha256(library->code())) << library->name();
  }
}

TEST_F(ServerTest, LoadHasCodeAndExecute) {
  const ActiveLibrary& test2 = active_libraries::test2();
  EXPECT_FALSE(*client_->HasCode(test2.hash()));
  absl::StatusOr<wire::CodeHash> hash = client_->Load(CodeKind::kNative, "test2", test2.code());
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, test2.hash());
  EXPECT_TRUE(*client_->HasCode(test2.hash()));
  EXPECT_EQ(*client_->Load(CodeKind::kNative, "", test2.code()), *hash);  // no-op
  EXPECT_EQ(Stat(*client_, "code.libraries"), 1u);

  EXPECT_EQ(U64At(*client_->Execute("test2.double", U64s({21})), 0), 42u);
  EXPECT_EQ(U64At(*client_->Execute(*hash, "test2.double", U64s({4})), 0), 8u);
  EXPECT_EQ(client_->Execute("nope.nothing", "").status().code(), absl::StatusCode::kNotFound);
  absl::Status bad_args = client_->Execute("test2.double", "x").status();
  EXPECT_EQ(bad_args.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_args.message(), HasSubstr("takes one u64"));
}

TEST_F(ServerTest, BadCodeGetsAClearErrorAndTheServerKeepsServing) {
  absl::Status s = client_->Load(CodeKind::kNative, "", "definitely not ELF").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  std::string truncated(active_libraries::test2().code().substr(0, 4096));
  s = client_->Load(CodeKind::kNative, "", truncated).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("cannot load shared object"));
  // Not a class file: refused by the JVM loader, or, in a build without a JDK, by the server.
  EXPECT_EQ(
      client_->Load(CodeKind::kJvm, "", "cafebabe").status().code(),
      JvmBuiltIn() ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(client_->Ping().ok());
}

TEST_F(ServerTest, FunctionErrorsBecomeErrorResponses) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  absl::Status s = client_->Execute("test.fail", "").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "test.fail asked to fail");
  // Out-of-bounds access inside active code surfaces as OUT_OF_RANGE.
  EXPECT_EQ(client_->Execute("test.add", U64s({1ull << 40, 1})).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(ServerTest, CallGoesFromOneLibraryIntoAnotherOnTheServer) {
  // EnsureLoaded ships the dependency (test2) first.
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  EXPECT_TRUE(*client_->HasCode(active_libraries::test2().hash()));
  uint64_t calls = Stat(*client_, "active.calls");
  EXPECT_EQ(U64At(*client_->Execute("test.call_double", U64s({50})), 0), 100u);
  EXPECT_EQ(Stat(*client_, "active.calls"), calls + 1);
}

TEST_F(ServerTest, ParkedRequestIsAnsweredByWake) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  std::unique_ptr<Client> waiter = NewClient();
  std::future<absl::StatusOr<std::string>> parked = waiter->ExecuteAsync("test.park", "lock-7");
  ASSERT_TRUE(testing::WaitUntil([&] { return Stat(*client_, "parked.now") >= 1; }));
  EXPECT_EQ(parked.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);

  std::string key = "lock-7";
  std::string wake_args = U64s({key.size()}) + key + "granted";
  EXPECT_EQ(U64At(*client_->Execute("test.wake", wake_args), 0), 1u);
  absl::StatusOr<std::string> result = parked.get();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, "granted");
  EXPECT_EQ(U64At(*client_->Execute("test.wake", wake_args), 0), 0u);  // nobody left
  EXPECT_EQ(Stat(*client_, "parked.now"), 0u);
}

TEST_F(ServerTest, ParkedRequestsAreWokenInArrivalOrder) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::future<absl::StatusOr<std::string>>> futures;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(NewClient());
    futures.push_back(clients.back()->ExecuteAsync("test.park", "q"));
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return Stat(*client_, "parked.now") >= static_cast<uint64_t>(i + 1); }));
  }
  for (int i = 0; i < 4; ++i) {
    std::string args = U64s({1}) + "q" + std::to_string(i);
    ASSERT_EQ(U64At(*client_->Execute("test.wake", args), 0), 1u);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*futures[i].get(), std::to_string(i));
}

// The server answers at the request's deadline: the client, which waits far longer, gets the
// server's answer, not its own timeout.
TEST_F(ServerTest, ParkedRequestPastItsDeadlineIsAnsweredDeadlineExceeded) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  absl::Status s = client_
                       ->Execute("test.park", "never",
                                 {.timeout = absl::Seconds(60),
                                  .server_deadline = absl::Milliseconds(100)})
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("parked request expired"));
}

TEST_F(ServerTest, JobWhoseDeadlinePassesInTheQueueIsDropped) {
  server_.reset();
  ServerOptions options = TestOptions();
  options.handler.workers = 1;
  StartServer(options);
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  // The only worker sleeps; a job queued behind it with a short deadline must not run.
  std::unique_ptr<Client> sleeper = NewClient();
  std::future<absl::StatusOr<std::string>> sleep = sleeper->ExecuteAsync("test.sleep", U64s({400}));
  ASSERT_TRUE(testing::WaitUntil([&] { return Stat(*client_, "execute.pooled") >= 1; }));
  absl::Status s =
      client_->Execute("test.add", U64s({kScratch + 16, 1}), {.timeout = absl::Milliseconds(50)})
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(sleep.get().ok());
  // The server answers DEADLINE_EXCEEDED once the worker gets to it; the add never ran.
  ASSERT_TRUE(testing::WaitUntil([&] { return Stat(*client_, "execute.expired") >= 1; }));
  EXPECT_EQ(U64At(*client_->Read(kScratch + 16, 8), 0), 0u);
}

// An idempotent call goes without the client's id: the server keeps no retry record of it.
TEST_F(ServerTest, AnIdempotentCallLeavesNoRetryRecord) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  const uint64_t before = Stat(*client_, "dedup.entries");
  ASSERT_TRUE(client_->Execute("test.echo", "a", {.idempotent = true}).ok());
  EXPECT_EQ(Stat(*client_, "dedup.entries"), before);
  ASSERT_TRUE(client_->Execute("test.echo", "b").ok());
  EXPECT_EQ(Stat(*client_, "dedup.entries"), before + 1);
}

TEST_F(ServerTest, ShortFunctionsRunInlineUntilARunIsSlow) {
  server_.reset();
  ServerOptions options = TestOptions();
  // Far above a sleep(0), far below a sleep(20ms), even on a loaded machine.
  options.handler.inline_threshold = absl::Milliseconds(5);
  StartServer(options);
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  ASSERT_TRUE(client_->Execute("test.sleep", U64s({0})).ok());  // unknown yet: pooled
  uint64_t pooled = Stat(*client_, "execute.pooled");
  uint64_t inlined = Stat(*client_, "execute.inline");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client_->Execute("test.sleep", U64s({0})).ok());
  EXPECT_EQ(Stat(*client_, "execute.inline"), inlined + 5);
  ASSERT_TRUE(client_->Execute("test.sleep", U64s({20})).ok());  // known short: inline, but slow
  ASSERT_TRUE(client_->Execute("test.sleep", U64s({0})).ok());   // so this one goes to a worker
  EXPECT_EQ(Stat(*client_, "execute.pooled"), pooled + 1);
}

// One run that overran on an I/O thread (a preempted thread on a loaded machine looks the same)
// sends only the next call to the pool; three in a row, with no short run on an I/O thread
// between them, send the function there for good. (Before: the first overrun did, and on a busy
// machine every short function ended up on the pool.)
TEST_F(ServerTest, AFunctionGoesToThePoolForGoodOnlyAfterThreeOverrunsInARow) {
  server_.reset();
  ServerOptions options = TestOptions();
  // Far above a sleep(20ms), so the average and last run keep it inline; a 20 ms run overruns the
  // 10 ms inline_overrun.
  options.handler.inline_threshold = absl::Milliseconds(200);
  StartServer(options);
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  auto inline_run = [&](uint64_t ms) {  // whether test.sleep(ms) ran on an I/O thread
    uint64_t inlined = Stat(*client_, "execute.inline");
    EXPECT_TRUE(client_->Execute("test.sleep", U64s({ms})).ok());
    return Stat(*client_, "execute.inline") == inlined + 1;
  };
  ASSERT_FALSE(inline_run(0));  // unknown yet: pooled
  ASSERT_TRUE(inline_run(0));
  for (int round = 0; round < 3; ++round) {  // an overrun, then a short run: forgiven
    EXPECT_TRUE(inline_run(20)) << "round " << round;
    EXPECT_TRUE(inline_run(0)) << "round " << round;
  }
  for (int overrun = 1; overrun <= 3; ++overrun) EXPECT_TRUE(inline_run(20)) << overrun;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(inline_run(0)) << i;
}

TEST_F(ServerTest, FunctionThatBacksOffLeavesTheIoThreadSoTheHolderCanRelease) {
  // One I/O thread serves both the waiter and the holder: if the waiter slept on it, the holder's
  // release could not be read until the waiter gave up.
  server_.reset();
  ServerOptions options = TestOptions();
  options.io_threads = 1;
  options.handler.inline_threshold = absl::Milliseconds(5);
  StartServer(options);
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  const uint64_t lock = kScratch + 32;
  const uint64_t kRounds = 10000;  // about 10 s of 1 ms backoffs before it gives up
  for (int i = 0; i < 3; ++i) {    // known short: runs inline from now on
    ASSERT_TRUE(client_->Execute("test.wait_zero", U64s({lock, kRounds})).ok());
  }
  EXPECT_EQ(Stat(*client_, "execute.rescheduled"), 0u);
  std::unique_ptr<Client> holder = NewClient();
  ASSERT_TRUE(holder->Write(lock, U64s({1})).ok());
  uint64_t inlined = Stat(*client_, "execute.inline");
  std::future<absl::StatusOr<std::string>> waiter =
      client_->ExecuteAsync("test.wait_zero", U64s({lock, kRounds}));
  testing::WaitUntil([&] { return Stat(*holder, "execute.rescheduled") != 0; });
  EXPECT_EQ(Stat(*holder, "execute.rescheduled"), 1u);
  EXPECT_EQ(Stat(*holder, "execute.inline"), inlined + 1);
  ASSERT_TRUE(holder->Write(lock, U64s({0})).ok());
  absl::StatusOr<std::string> waited = waiter.get();
  EXPECT_TRUE(waited.ok()) << waited.status();

  // Backing off past the deadline is DEADLINE_EXCEEDED, wherever it runs.
  ASSERT_TRUE(holder->Write(lock, U64s({1})).ok());
  absl::Status late =
      client_
          ->Execute("test.wait_zero", U64s({lock, kRounds}), {.timeout = absl::Milliseconds(100)})
          .status();
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
}

TEST_F(ServerTest, ResumableParkRunsAgainAtItsTimeOrWhenResumed) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  const uint64_t counter = kScratch + 48;
  // Nobody wakes it: at its resume time it runs again, as phase 1, and that run answers.
  absl::StatusOr<std::string> r = client_->Execute("test.resumable", U64s({counter, 30000, 0}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(U64At(*r, 0), 1u);
  EXPECT_EQ(U64At(*client_->Read(counter, 8), 0), 101u);
  EXPECT_EQ(Stat(*client_, "execute.resumed"), 1u);
  // Resumed at once by another request, long before its resume time (an hour).
  std::future<absl::StatusOr<std::string>> parked =
      client_->ExecuteAsync("test.resumable", U64s({counter, 3600000000ull, 0}));
  std::unique_ptr<Client> other = NewClient();
  uint64_t resumed = 0;
  testing::WaitUntil([&] { return (resumed = U64At(*other->Execute("test.resume", ""), 0)) != 0; });
  EXPECT_EQ(resumed, 1u);
  r = parked.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(U64At(*r, 0), 1u);
  EXPECT_EQ(U64At(*client_->Read(counter, 8), 0), 202u);
  EXPECT_EQ(U64At(*other->Execute("test.resume", ""), 0), 0u);  // nobody left to resume
}

TEST_F(ServerTest, CloseHooksRunWhenTheirConnectionCloses) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  const uint64_t counter = kScratch + 56;
  std::unique_ptr<Client> leaving = NewClient();
  ASSERT_TRUE(leaving->Execute("test.add_on_close", U64s({counter})).ok());
  EXPECT_EQ(U64At(*client_->Read(counter, 8), 0), 0u);  // not yet: still connected
  leaving.reset();
  uint64_t value = 0;
  testing::WaitUntil([&] { return (value = U64At(*client_->Read(counter, 8), 0)) != 0; });
  EXPECT_EQ(value, 1u);  // the removed hook (+1000) did not run
  EXPECT_EQ(Stat(*client_, "close_hooks.run"), 1u);
  // One-sided callers have no connection hooks: OnClose is refused over RemoteContext.
  RemoteContext remote(client_.get(), {&active_libraries::test()});
  EXPECT_EQ(active_libraries::test()
                .table()
                .Find("test.add_on_close")(remote, U64s({counter}))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServerTest, ModelledAccessCostIsPaidPerMemoryAccessOfActiveCode) {
  server_.reset();
  ServerOptions options = TestOptions();
  options.handler.access_cost = absl::Milliseconds(10);
  StartServer(options);
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  // test.view_sum makes one access; test.call_double none (it only calls).
  uint64_t ns0 = Stat(*client_, "execute.ns");
  ASSERT_TRUE(client_->Execute("test.view_sum", U64s({kScratch, 8})).ok());
  uint64_t one_access = Stat(*client_, "execute.ns") - ns0;
  EXPECT_GE(one_access, 10'000'000u);  // a lower bound only
  // One-sided operations are not active code: no cost.
  ASSERT_TRUE(client_->Read(kScratch, 8).ok());
}

// The I/O threads' names and allowed CPUs, from /proc.
std::vector<std::pair<std::string, std::string>> IoThreads(const std::string& field) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("ardma-io-", 0) != 0) continue;
    std::ifstream status(task.path() / "status");
    std::string line, value;
    while (std::getline(status, line)) {
      if (line.rfind(field + ":", 0) == 0) value = line.substr(field.size() + 2);
    }
    out.emplace_back(name, value);
  }
  return out;
}

TEST_F(ServerTest, IoThreadsCanBePinnedToACpuAndRunRealtime) {
  server_.reset();
  ServerOptions options = TestOptions();
  options.io_threads = 2;
  options.io_cpus = {0};
  StartServer(options);
  std::vector<std::pair<std::string, std::string>> threads = IoThreads("Cpus_allowed_list");
  ASSERT_EQ(threads.size(), 2u);
  for (const auto& [name, cpus] : threads) EXPECT_EQ(cpus, "0") << name;
  EXPECT_TRUE(client_->Ping().ok());
  server_.reset();
  // CPUs that do not exist fail at start, clearly.
  options.io_cpus = {1000};  // below CPU_SETSIZE, but no such CPU here
  absl::StatusOr<std::unique_ptr<Server>> bad = Server::Start(options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("CPU 1000"));
  // --realtime works where permitted, and otherwise says what it needs.
  options.io_cpus.clear();
  options.realtime = true;
  absl::StatusOr<std::unique_ptr<Server>> rt = Server::Start(options);
  if (rt.ok()) {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("ardma-io-", 0) != 0) continue;
      EXPECT_EQ(::sched_getscheduler(std::stoi(task.path().filename().string())), SCHED_FIFO);
    }
  } else {
    EXPECT_EQ(rt.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(rt.status().message(), HasSubstr("SCHED_FIFO"));
  }
}

TEST_F(ServerTest, RunawayFunctionIsStoppedAtItsDeadline) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  absl::Status s = client_
                       ->Execute("test.spin", U64s({10000}),
                                 {.timeout = absl::Seconds(60),
                                  .server_deadline = absl::Milliseconds(100)})
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("ran past its deadline"));  // the server's, not a timeout
  EXPECT_TRUE(client_->Ping().ok());
}

// Shipped code that throws fails its own request and nothing else (issue 22).
TEST_F(ServerTest, AnExceptionFromShippedCodeFailsOnlyItsRequest) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  absl::Status s = client_->Execute("test.throw", U64s({1})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("thrown by test.throw"));
  s = client_->Execute("test.throw", U64s({2})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  s = client_->Execute("test.throw", U64s({3})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("not a std::exception"));
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_TRUE(client_->Execute("test.noop", "").ok());
}

TEST_F(ServerTest, RetriedExecuteRunsOnce) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  wire::ExecuteRequest req;
  req.function = "test.add";
  std::string args = U64s({kScratch + 24, 1});
  req.args = args;
  std::string payload;
  wire::EncodeExecuteRequest(req, &payload);
  std::string first_result;
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Each attempt on a new connection, as after a broken one: same client id, same request id.
    RawSocket socket(server_->port());
    ASSERT_TRUE(socket.ok());
    ASSERT_TRUE(socket.SendFrame(wire::Op::kExecute, payload, /*request_id=*/5, /*client_id=*/77));
    std::optional<testing::RawResponse> r = socket.Receive();
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->header.status, 0) << r->payload;
    if (attempt == 0) first_result = r->payload;
    EXPECT_EQ(r->payload, first_result);
  }
  EXPECT_EQ(U64At(*client_->Read(kScratch + 24, 8), 0), 1u);
  EXPECT_EQ(Stat(*client_, "dedup.replays"), 2u);
}

// A WRITE retried after a broken connection (same client and request id) is not applied again:
// it would overwrite what was written in between.
TEST_F(ServerTest, RetriedWriteIsNotAppliedAgain) {
  auto write = [](uint64_t value) {
    std::string data(8, '\0');
    std::memcpy(data.data(), &value, 8);
    std::string payload;
    std::vector<wire::WriteEntry> entries = {{0, kScratch + 40, data}};
    wire::EncodeWriteRequest(entries, &payload);
    return payload;
  };
  uint64_t replays = Stat(*client_, "dedup.replays");
  {
    RawSocket socket(server_->port());
    ASSERT_TRUE(socket.ok());
    ASSERT_TRUE(socket.SendFrame(wire::Op::kWrite, write(1), /*request_id=*/9, /*client_id=*/78));
    ASSERT_TRUE(socket.Receive().has_value());
  }
  ASSERT_TRUE(client_->Write(kScratch + 40, U64s({2})).ok());  // newer data
  RawSocket retry(server_->port());
  ASSERT_TRUE(retry.ok());
  ASSERT_TRUE(retry.SendFrame(wire::Op::kWrite, write(1), /*request_id=*/9, /*client_id=*/78));
  std::optional<testing::RawResponse> r = retry.Receive();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->header.status, 0) << r->payload;  // answered as the first time
  EXPECT_EQ(U64At(*client_->Read(kScratch + 40, 8), 0), 2u);
  EXPECT_EQ(Stat(*client_, "dedup.replays"), replays + 1);
}

TEST_F(ServerTest, ResponsesComeBackOutOfOrder) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  wire::ExecuteRequest req;
  req.function = "test.sleep";
  std::string args = U64s({200});
  req.args = args;
  std::string payload;
  wire::EncodeExecuteRequest(req, &payload);
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.SendFrame(wire::Op::kExecute, payload, /*request_id=*/1, 0));
  ASSERT_TRUE(socket.SendFrame(wire::Op::kPing, "fast", /*request_id=*/2, 0));
  std::optional<testing::RawResponse> first = socket.Receive();
  std::optional<testing::RawResponse> second = socket.Receive();
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->header.request_id, 2u);  // the PING overtook the sleeping EXECUTE
  EXPECT_EQ(first->payload, "fast");
  EXPECT_EQ(second->header.request_id, 1u);
  EXPECT_EQ(second->header.status, 0);
}

TEST_F(ServerTest, InflightLimitPausesReadingWithoutLosingRequests) {
  server_.reset();
  ServerOptions options = TestOptions();
  options.handler.limits.max_inflight_per_connection = 4;
  options.handler.inline_threshold = absl::ZeroDuration();  // every EXECUTE waits for a worker
  options.handler.worker_queue = 8;  // without the pause, 300 pipelined requests would overflow it
  StartServer(options);
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  RawSocket socket(server_->port());
  std::string burst;
  constexpr uint64_t kRequests = 300;
  for (uint64_t id = 1; id <= kRequests; ++id) {
    wire::ExecuteRequest req;
    req.function = "test.echo";
    std::string args = std::to_string(id);
    req.args = args;
    size_t start = wire::BeginFrame(&burst);
    wire::EncodeExecuteRequest(req, &burst);
    wire::FinishFrame({.op = wire::Op::kExecute, .request_id = id}, start, &burst);
  }
  ASSERT_TRUE(socket.SendBytes(burst));  // all pipelined in one write
  std::set<uint64_t> answered;
  for (uint64_t i = 1; i <= kRequests; ++i) {
    std::optional<testing::RawResponse> r = socket.Receive();
    ASSERT_TRUE(r.has_value()) << i;
    ASSERT_EQ(r->header.status, 0) << r->payload;
    EXPECT_EQ(r->payload, std::to_string(r->header.request_id));
    answered.insert(r->header.request_id);
  }
  EXPECT_EQ(answered.size(), kRequests);
  EXPECT_EQ(Stat(*client_, "execute.pooled"), kRequests);
  EXPECT_EQ(Stat(*client_, "execute.rejected"), 0u);  // never more than 4 queued from it
}

// Requests pipelined ahead of a frame with a bad header are answered — inline ones and one a
// worker answers later — before the connection closes (issue 32, D: they were dropped).
TEST_F(ServerTest, RequestsAheadOfAMalformedFrameAreAnsweredBeforeTheClose) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  for (bool named : {true, false}) {  // the bad frame still names a request, or is plain garbage
    RawSocket socket(server_->port());
    ASSERT_TRUE(socket.ok());
    std::string burst;
    size_t start = wire::BeginFrame(&burst);
    burst.append("first");
    wire::FinishFrame({.op = wire::Op::kPing, .request_id = 1}, start, &burst);
    start = wire::BeginFrame(&burst);
    wire::EncodeExecuteRequest({.function = "test.sleep", .args = U64s({100})}, &burst);
    wire::FinishFrame({.op = wire::Op::kExecute, .request_id = 2}, start, &burst);
    start = wire::BeginFrame(&burst);
    burst.append("third");
    wire::FinishFrame({.op = wire::Op::kPing, .request_id = 3}, start, &burst);
    std::string bad;
    start = wire::BeginFrame(&bad);
    wire::FinishFrame({.op = wire::Op::kPing, .request_id = 4}, start, &bad);
    if (named) {
      bad[4] ^= 0x7f;  // the version: the header still names request 4
    } else {
      bad.assign(bad.size(), 'x');
    }
    ASSERT_TRUE(socket.SendBytes(burst + bad));
    std::map<uint64_t, testing::RawResponse> answers;
    while (std::optional<testing::RawResponse> r = socket.Receive()) {
      answers[r->header.request_id] = *r;
    }
    ASSERT_EQ(answers.count(1), 1u) << "named " << named;
    EXPECT_EQ(answers[1].payload, "first");
    ASSERT_EQ(answers.count(2), 1u) << "the worker's answer was dropped (named " << named << ")";
    EXPECT_EQ(answers[2].header.status, 0);
    ASSERT_EQ(answers.count(3), 1u);
    EXPECT_EQ(answers[3].payload, "third");
    EXPECT_EQ(answers.count(4), named ? 1u : 0u);
    if (named) {
      EXPECT_EQ(answers[4].header.status,
                static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
    }
    EXPECT_TRUE(socket.WaitClosed());
  }
}

// --max-queued bounds one connection; the server-wide bound keeps many clients that never read
// from holding that much each (issue 32, D: 4 such clients held 4 x 64 MiB). A client that
// reads is still served.
TEST_F(ServerTest, AnswersQueuedOverAllConnectionsAreBounded) {
  server_.reset();
  ServerOptions options = TestOptions();
  options.handler.limits.max_queued_bytes_per_connection = 64 << 20;
  options.handler.limits.max_queued_bytes_total = 24 << 20;
  StartServer(options);
  std::string read;
  wire::ReadEntry entry{.region = 0, .addr = 0, .len = 4u << 20};
  wire::EncodeReadRequest({&entry, 1}, &read);
  std::vector<std::unique_ptr<RawSocket>> greedy;
  for (int c = 0; c < 4; ++c) {
    greedy.push_back(std::make_unique<RawSocket>(server_->port()));
    ASSERT_TRUE(greedy.back()->ok());
    for (uint64_t id = 1; id <= 16; ++id) {  // 64 MiB of answers each, never read
      ASSERT_TRUE(greedy.back()->SendFrame(wire::Op::kRead, read, id, 0));
    }
  }
  // Wait until the server has stopped reading them: the level no longer grows.
  uint64_t level = 0;
  testing::WaitUntil(
      [&] {
        uint64_t now = Stat(*client_, "connections.queued_bytes");
        bool steady = now == level && now > 0;
        level = now;
        return steady;
      },
      absl::Seconds(10), /*interval=*/absl::Milliseconds(200));
  // The limit, plus one answer per connection made before the limit was seen.
  EXPECT_LE(level, (24u << 20) + 4 * (4u << 20) + 4096) << "queued " << (level >> 20) << " MiB";
  EXPECT_GE(level, 20u << 20);
  EXPECT_TRUE(client_->Ping().ok());  // a client that reads is served
  EXPECT_TRUE(client_->Read(kScratch, 4).ok());
  greedy.clear();  // closing them gives it all back
  testing::WaitUntil([&] { return Stat(*client_, "connections.queued_bytes") == 0; },
                     absl::Seconds(10));
  EXPECT_EQ(Stat(*client_, "connections.queued_bytes"), 0u);
}

TEST_F(ServerTest, GarbageFromOneClientDoesNotDisturbAnother) {
  std::atomic<bool> stop{false};
  std::atomic<int> good_ops{0};
  std::thread worker([&] {
    std::unique_ptr<Client> client = NewClient();
    uint64_t i = 0;
    while (!stop.load()) {
      ASSERT_TRUE(client->Write(kScratch + 64, U64s({i})).ok());
      ASSERT_EQ(U64At(*client->Read(kScratch + 64, 8), 0), i);
      ++i;
      ++good_ops;
    }
  });
  auto wait_for_ops = [&good_ops](int at_least) {
    return testing::WaitUntil([&] { return good_ops.load() >= at_least; }, absl::Seconds(10));
  };
  ASSERT_TRUE(wait_for_ops(1));  // the good client is running before the garbage starts
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20; ++i) {
    RawSocket junk(server_->port());
    ASSERT_TRUE(junk.ok());
    std::string bytes(64 + rng() % 4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    junk.SendBytes(bytes);
    EXPECT_TRUE(junk.WaitClosed());
  }
  // A well-formed frame with an unknown op gets an error and the connection stays usable.
  RawSocket odd(server_->port());
  ASSERT_TRUE(odd.SendFrame(static_cast<wire::Op>(99), "", 1, 0));
  std::optional<testing::RawResponse> r = odd.Receive();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->header.status, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
  ASSERT_TRUE(odd.SendFrame(wire::Op::kPing, "still here", 2, 0));
  r = odd.Receive();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->payload, "still here");
  // A malformed payload in a valid frame is an error response, not a crash.
  ASSERT_TRUE(odd.SendFrame(wire::Op::kRead, "\1\0\0\0short", 3, 0));
  r = odd.Receive();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->header.status, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
  // An oversized frame is refused (with an answer) and the connection closed, without allocating.
  std::string huge;
  size_t start = wire::BeginFrame(&huge);
  wire::FinishFrame({.op = wire::Op::kWrite, .request_id = 4}, start, &huge);
  uint32_t len = 0xfffffff0u;
  std::memcpy(&huge[12], &len, 4);
  ASSERT_TRUE(odd.SendBytes(huge));
  r = odd.Receive();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->header.status, static_cast<uint16_t>(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(odd.WaitClosed());

  // ... and it keeps making progress afterwards.
  int after = good_ops.load();
  EXPECT_TRUE(wait_for_ops(after + 10));
  stop = true;
  worker.join();
  EXPECT_GE(Stat(*client_, "connections.protocol_errors"), 20u);
}

// Resident memory of this process (the server runs in it), from /proc.
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

TEST_F(ServerTest, ClaimedFrameLengthsDoNotAllocateMemoryBeforeTheBytesArrive) {
  uint64_t before = ResidentBytes();
  std::vector<std::unique_ptr<RawSocket>> sockets;
  for (int i = 0; i < 20; ++i) {
    auto socket = std::make_unique<RawSocket>(server_->port());
    std::string frame;
    size_t start = wire::BeginFrame(&frame);
    frame += "abc";
    wire::FinishFrame({.op = wire::Op::kWrite, .request_id = 1}, start, &frame);
    uint32_t claimed = 60u << 20;  // within the 64 MiB limit, but only 3 bytes follow
    std::memcpy(&frame[12], &claimed, 4);
    ASSERT_TRUE(socket->SendBytes(frame));
    sockets.push_back(std::move(socket));
  }
  ASSERT_TRUE(client_->Ping().ok());  // the server has read what was sent
  // The sleep is under test: time in which the server could allocate for the claimed lengths
  // (no event marks that it did not).
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_LT(ResidentBytes() - before, 100u << 20)
      << "20 connections claiming 60 MiB each must not cost 1.2 GB";
}

TEST_F(ServerTest, ViewIsLocalOnlyAndGivesTheSameAnswer) {
  ASSERT_TRUE(client_->Write(kScratch + 512, "\x01\x02\x03\x04").ok());
  const ActiveLibrary& test = active_libraries::test();
  std::string args = U64s({kScratch + 512, 4});
  EXPECT_EQ(U64At(*Invoke(*client_, Mode::kActive, test, "test.view_sum", args), 0), 10u);
  EXPECT_EQ(U64At(*Invoke(*client_, Mode::kRdma, test, "test.view_sum", args), 0), 10u);
  // Park needs the server.
  EXPECT_EQ(Invoke(*client_, Mode::kRdma, test, "test.park", "k").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServerTest, ClientReconnectsToARestartedServerAndReshipsCode) {
  const ActiveLibrary& test2 = active_libraries::test2();
  ASSERT_TRUE(Invoke(*client_, Mode::kActive, test2, "test2.double", U64s({1})).ok());
  ASSERT_NO_FATAL_FAILURE(RestartOnSamePort());
  // The old connection is dead; the next call reconnects and, the code being gone, reships it.
  absl::StatusOr<std::string> r = Invoke(*client_, Mode::kActive, test2, "test2.double", U64s({8}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(U64At(*r, 0), 16u);
  EXPECT_GE(client_->counters().reconnects.load(), 1u);
}

// InvokeAsync: the request is on its way when it returns (the server runs it before anyone
// waits), and, like Invoke, a restarted server gets the code again.
TEST_F(ServerTest, InvokeAsyncSendsAtOnceAndReshipsCodeToARestartedServer) {
  const ActiveLibrary& test2 = active_libraries::test2();
  auto executed = [&] {
    return Stat(*client_, "execute.inline") + Stat(*client_, "execute.pooled");
  };
  uint64_t before = executed();
  std::future<absl::StatusOr<std::string>> sent =
      InvokeAsync(*client_, Mode::kActive, test2, "test2.double", U64s({21}));
  ASSERT_TRUE(testing::WaitUntil([&] { return executed() > before; }));
  absl::StatusOr<std::string> r = sent.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(U64At(*r, 0), 42u);

  ASSERT_NO_FATAL_FAILURE(RestartOnSamePort());
  r = InvokeAsync(*client_, Mode::kActive, test2, "test2.double", U64s({8})).get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(U64At(*r, 0), 16u);
  EXPECT_EQ(InvokeAsync(*client_, Mode::kActive, test2, "test2.nothing", "").get().status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ServerTest, StopsCleanlyWithParkedRequestsQueuedJobsAndOpenConnections) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  std::unique_ptr<Client> parked_client = NewClient();
  std::future<absl::StatusOr<std::string>> parked = parked_client->ExecuteAsync("test.park", "z");
  std::unique_ptr<Client> sleeper = NewClient();
  std::future<absl::StatusOr<std::string>> sleeping =
      sleeper->ExecuteAsync("test.sleep", U64s({200}));
  ASSERT_TRUE(testing::WaitUntil([&] { return Stat(*client_, "parked.now") >= 1; }));
  server_.reset();  // must neither hang nor crash
  absl::StatusOr<std::string> p = parked.get();
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable) << p.status();
  (void)sleeping.get();
}

TEST_F(ServerTest, AsyncCallbackMayReconnectAfterItsConnectionBroke) {
  // The callback reconnects while the server is still being restarted: this client tries for
  // seconds, not the default's ~150 ms (on a loaded machine the restart took longer).
  ClientOptions patient;
  patient.connect_attempts = 100;
  patient.backoff_max = absl::Milliseconds(50);
  std::unique_ptr<Client> client = NewClient(patient);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(EnsureLoaded(*client, active_libraries::test()).ok());
  std::promise<absl::Status> nested;
  std::string parked_request;
  wire::ExecuteRequest req;
  req.function = "test.park";  // never answered: it ends when the connection breaks
  req.args = "forever";
  wire::EncodeExecuteRequest(req, &parked_request);
  client->CallAsync(wire::Op::kExecute, parked_request, [&client, &nested](ResponsePayload first) {
    // Runs on the broken connection's reader; this call replaces that connection.
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
    client->CallAsync(wire::Op::kPing, "again",
                      [&nested](ResponsePayload second) { nested.set_value(second.status()); });
  });
  ASSERT_TRUE(testing::WaitUntil([&] { return Stat(*client_, "parked.now") >= 1; }));
  ASSERT_NO_FATAL_FAILURE(RestartOnSamePort());
  std::future<absl::Status> done = nested.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  absl::Status second = done.get();
  EXPECT_TRUE(second.ok()) << second;
  EXPECT_TRUE(client->Ping().ok());
}

TEST_F(ServerTest, UnixDomainSocketServesTheSameProtocol) {
  std::string path = ::testing::TempDir() + "ardmad." + std::to_string(::getpid()) + ".sock";
  std::filesystem::remove(path);
  server_.reset();
  ServerOptions options = TestOptions();
  options.unix_socket = path;
  StartServer(options);
  EXPECT_TRUE(std::filesystem::is_socket(path));

  std::unique_ptr<Client> local = *Client::Connect("unix:" + path);
  ASSERT_TRUE(local->Write(kScratch, "over a unix socket").ok());
  EXPECT_EQ(*client_->Read(kScratch, 18), "over a unix socket");  // same memory as over TCP
  const ActiveLibrary& test2 = active_libraries::test2();
  EXPECT_EQ(U64At(*Invoke(*local, Mode::kActive, test2, "test2.double", U64s({7})), 0), 14u);

  // A second server cannot take a socket that answers ...
  ServerOptions clash = TestOptions();
  clash.unix_socket = path;
  EXPECT_EQ(Server::Start(clash).status().code(), absl::StatusCode::kUnavailable);
  // ... and the socket file goes away with the server.
  local.reset();
  server_.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(Client::Connect("unix:" + path, {.connect_attempts = 1}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Client::Connect("unix:").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ServerTest, StaleUnixSocketFileIsReplaced) {
  std::string path = ::testing::TempDir() + "ardmad-stale." + std::to_string(::getpid()) + ".sock";
  std::filesystem::remove(path);
  {
    // A socket file nobody listens on, as a killed server leaves behind.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  ASSERT_TRUE(std::filesystem::is_socket(path));
  server_.reset();
  ServerOptions options = TestOptions();
  options.unix_socket = path;
  StartServer(options);
  EXPECT_TRUE((*Client::Connect("unix:" + path))->Ping().ok());
}

TEST_F(ServerTest, CallTimeoutAndUnreachableServer) {
  ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  EXPECT_EQ(client_->Execute("test.sleep", U64s({300}), {.timeout = absl::Milliseconds(50)})
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(client_->Ping().ok());  // the late answer is dropped, the connection is fine

  uint16_t port = server_->port();
  server_.reset();
  ClientOptions options;
  options.connect_attempts = 2;
  absl::StatusOr<std::unique_ptr<Client>> none =
      Client::Connect("127.0.0.1:" + std::to_string(port), options);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Client::Connect("not-an-address").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ServerTest, ExtraRoundTripTimeLengthensEverySynchronousFlight) {
  ClientOptions options;
  options.extra_round_trip_time = absl::Milliseconds(30);
  std::unique_ptr<Client> slow = NewClient(options);
  uint64_t rt0 = slow->counters().round_trips;
  absl::Time start = absl::Now();
  ASSERT_TRUE(slow->Write(kScratch, "abc").ok());
  // One flight: one extra round-trip time, however many operations it carries.
  absl::StatusOr<Batch::Result> r = slow->Batch().Read(kScratch, 3).Read(kScratch + 1, 2).Send();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reads[0], "abc");
  ASSERT_TRUE(slow->Ping().ok());
  // A lower bound only: the delay can make a flight slower, never faster.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(slow->counters().round_trips - rt0, 3u);
}

}  // namespace
}  // namespace ardma
