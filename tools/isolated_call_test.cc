// How an isolated call reaches its worker (core/server/isolation.h, isolation_mailbox.h): from
// the request's own thread (an I/O thread, or a UCX progress thread) through the worker's mailbox,
// with payloads too long for it on the worker's socket, a wait handed to the pool when the call
// outlasts an inline run, and --isolate-spin. The same suite runs over TCP and over UCX shared
// memory.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/testing/run_command.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;
using testing::StatOf;
using testing::U64s;

constexpr size_t kMailboxBytes = size_t{256} << 10;  // Mailbox::kCapacity

struct Transport {
  std::string name;
  bool ucx;
};
void PrintTo(const Transport& t, std::ostream* out) { *out << t.name; }

class IsolatedCallTest : public ::testing::TestWithParam<Transport> {
 protected:
  static void SetUpTestSuite() { ::setenv("UCX_TLS", "shm,self", /*overwrite=*/1); }

  // An ardmad isolating every call, with one I/O thread and two workers (and `extra` flags). A
  // function counts as short below 50 ms, so a loaded machine does not send calls to the pool.
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--memory", "16M",          "--isolate",
                                      "all",      "--workers",    "2",
                                      "--io-threads", "1",        "--inline-threshold",
                                      "50ms"};
    if (!GetParam().ucx) flags.insert(flags.end(), {"--ucx", "off"});
    flags.insert(flags.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<testing::ServerProcess>(flags);
    ASSERT_FALSE(daemon_->address().empty());
    client_ = Connect();
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(EnsureLoaded(*client_, active_libraries::test()).ok());
  }
  std::unique_ptr<Client> Connect() {
    std::string address = daemon_->address();
    if (GetParam().ucx) address = absl::StrCat("ucx://", address);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(address);
    return c.ok() ? *std::move(c) : nullptr;
  }
  // Calls `function` until the server calls its worker from the request's own thread.
  void WarmUp(const std::string& function = "test.echo", const std::string& args = "") {
    uint64_t before = StatOf(*client_, "isolated.inline");
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          EXPECT_TRUE(client_->Execute(function, args).ok());
          return StatOf(*client_, "isolated.inline") > before;
        },
        absl::Seconds(10)));
  }

  std::unique_ptr<testing::ServerProcess> daemon_;
  std::unique_ptr<Client> client_;
};

// A short call, once known to be short, is run from the thread that read it: no hop to the pool.
TEST_P(IsolatedCallTest, AKnownShortCallIsRunFromTheRequestsOwnThread) {
  Start();
  WarmUp();
  uint64_t inline0 = StatOf(*client_, "isolated.inline");
  uint64_t runs0 = StatOf(*client_, "isolated.runs");
  for (uint64_t i = 0; i < 50; ++i) {
    absl::StatusOr<std::string> r = client_->Execute("test.echo", absl::StrCat("call ", i));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, absl::StrCat("call ", i));
  }
  EXPECT_EQ(StatOf(*client_, "isolated.runs") - runs0, 50u);
  EXPECT_EQ(StatOf(*client_, "isolated.inline") - inline0, 50u);
  EXPECT_EQ(StatOf(*client_, "isolated.handed_off"), 0u);
  EXPECT_EQ(StatOf(*client_, "isolated.restarts"), 0u);
}

// Arguments and results of every length reach the worker and come back whole: those that fit the
// mailbox in it, longer ones on the worker's socket.
TEST_P(IsolatedCallTest, PayloadsOfEveryLengthCrossWhole) {
  Start();
  for (size_t length : {size_t{0}, size_t{1}, kMailboxBytes - 100, kMailboxBytes,
                        kMailboxBytes + 1, size_t{3} << 20}) {
    std::string args(length, '\0');
    for (size_t i = 0; i < length; ++i) args[i] = static_cast<char>('a' + (i * 7) % 26);
    absl::StatusOr<std::string> r = client_->Execute("test.echo", args);
    ASSERT_TRUE(r.ok()) << length << ": " << r.status();
    EXPECT_TRUE(*r == args) << "length " << length;
  }
  EXPECT_EQ(StatOf(*client_, "isolated.restarts"), 0u);
}

// A call that outlasts an inline run frees the I/O thread: its wait goes on on the pool, another
// connection is served meanwhile, and the call's answer is still its own.
TEST_P(IsolatedCallTest, ACallThatOutlastsAnInlineRunIsFinishedOnThePool) {
  Start();
  WarmUp("test.busy", U64s({0}));
  // 5 s of work: far past an inline run (10 ms), well inside the deadline.
  absl::StatusOr<std::string> long_call;
  std::atomic<bool> answered{false};
  std::thread caller([&] {
    long_call = client_->Execute("test.busy", U64s({5000}));
    answered = true;
  });
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        std::unique_ptr<Client> other = Connect();
        return other != nullptr && StatOf(*other, "isolated.handed_off") == 1;
      },
      absl::Seconds(10)));
  // The one I/O thread answers another connection while the call runs (the pool thread waits).
  std::unique_ptr<Client> other = Connect();
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->Ping().ok());
  absl::StatusOr<std::string> quick = other->Execute("test.echo", "meanwhile");
  ASSERT_TRUE(quick.ok()) << quick.status();
  EXPECT_EQ(*quick, "meanwhile");
  EXPECT_FALSE(answered.load());  // answered while the long call still runs
  caller.join();
  ASSERT_TRUE(long_call.ok()) << long_call.status();
  EXPECT_EQ(StatOf(*client_, "isolated.restarts"), 0u);
}

// A worker that dies while an I/O thread waits for it wakes that thread at once (not at the
// deadline): the call is INTERNAL, the next one is served by a new worker.
TEST_P(IsolatedCallTest, AWorkerThatDiesWakesTheThreadWaitingForIt) {
  Start();
  WarmUp("test.crash", U64s({0}));  // (mode 0 does not crash)
  uint64_t inline0 = StatOf(*client_, "isolated.inline");
  absl::StatusOr<std::string> crashed = client_->Execute(
      "test.crash", U64s({1}), {.timeout = absl::Seconds(60), .server_deadline = absl::Seconds(50)});
  EXPECT_EQ(crashed.status().code(), absl::StatusCode::kInternal) << crashed.status();
  EXPECT_THAT(crashed.status().message(), HasSubstr("crashed its isolated worker"));
  EXPECT_EQ(StatOf(*client_, "isolated.inline"), inline0 + 1);  // it was waited for inline
  EXPECT_EQ(StatOf(*client_, "isolated.restarts"), 1u);
  absl::StatusOr<std::string> next = client_->Execute("test.echo", "next");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, "next");
}

// --isolate-spin: the same answers with both sides spinning for their turn; bad values are
// refused.
TEST_P(IsolatedCallTest, SpinningWorkersGiveTheSameAnswers) {
  Start({"--isolate-spin", "200us"});
  WarmUp();
  for (uint64_t i = 0; i < 20; ++i) {
    absl::StatusOr<std::string> r = client_->Execute("test.echo", absl::StrCat(i));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, absl::StrCat(i));
  }
  std::string out;
  EXPECT_EQ(testing::RunCommand(absl::StrCat(testing::BinDir(), "/ardmad --isolate-spin 2s"), &out),
            2);
  EXPECT_THAT(out, HasSubstr("--isolate-spin"));
}

INSTANTIATE_TEST_SUITE_P(Transports, IsolatedCallTest,
                         ::testing::Values(Transport{"tcp", false}, Transport{"ucx_shm", true}),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ardma
