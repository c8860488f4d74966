// The compile farm's job queue (cc_queue.h) through real connections: parked submitters and
// slaves, FCFS order, jobs given back by a slave that goes away, withdrawn by a submitter that
// goes away, and the status table.
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/client/invoke.h"
#include "core/testing/raw_socket.h"
#include "core/testing/test_server.h"
#include "core/testing/wait_until.h"
#include "core/wire/byte_io.h"
#include "core/wire/messages.h"
#include "gtest/gtest.h"
#include "services/cc/cc_client.h"

namespace ardma::cc {
namespace {

using ::ardma::testing::TestServer;

class CcQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  std::unique_ptr<Client> NewClient() {
    auto c = server_->NewClient();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // Submits from a connection of its own; the future holds the result.
  std::future<absl::StatusOr<std::string>> SubmitAsync(uint64_t id, std::string descriptor) {
    std::shared_ptr<Client> client = NewClient();
    return std::async(std::launch::async, [client, id, descriptor] {
      return CcClient(client.get()).Submit(id, descriptor, absl::Seconds(20));
    });
  }
  // Waits until the farm shows `queued` jobs queued.
  void WaitQueued(Client& c, uint64_t queued) {
    ASSERT_TRUE(testing::WaitUntil([&] {
      auto st = CcClient(&c).Status();
      return st.ok() && st->queued == queued;
    })) << "never "
        << queued << " queued";
  }

  std::unique_ptr<TestServer> server_;
};

TEST_F(CcQueueTest, SubmitterWaitsForTheSlavesResultAndJobsGoFirstComeFirstServed) {
  auto slave = NewClient();
  CcClient farm(slave.get());
  auto first = SubmitAsync(1, "job one");
  WaitQueued(*slave, 1);
  auto second = SubmitAsync(2, "job two");
  WaitQueued(*slave, 2);
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);

  auto a = farm.Take("s1", absl::Seconds(5));
  ASSERT_TRUE(a.ok() && a->has_value()) << a.status();
  EXPECT_EQ((*a)->id, 1u);
  EXPECT_EQ((*a)->descriptor, "job one");
  auto b = farm.Take("s1", absl::Seconds(5));
  ASSERT_TRUE(b.ok() && b->has_value()) << b.status();
  EXPECT_EQ((*b)->id, 2u);
  auto st = farm.Status();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->running, 2u);
  ASSERT_EQ(st->slaves.size(), 1u);
  EXPECT_EQ(st->slaves[0].name, "s1");
  EXPECT_EQ(st->slaves[0].running, 2u);

  auto woke = farm.Finish(2, "s1", false, "object two");
  ASSERT_TRUE(woke.ok()) << woke.status();
  EXPECT_TRUE(*woke);
  EXPECT_EQ(second.get().value_or("?"), "object two");
  ASSERT_TRUE(farm.Finish(1, "s1", false, "object one").ok());
  EXPECT_EQ(first.get().value_or("?"), "object one");
  // Finishing twice, or someone else's job, is refused.
  EXPECT_EQ(farm.Finish(1, "s1", false, "again").status().code(), absl::StatusCode::kNotFound);

  st = farm.Status();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->submitted, 2u);
  EXPECT_EQ(st->finished, 2u);
  EXPECT_EQ(st->queued + st->running, 0u);
  EXPECT_EQ(st->slaves[0].done, 2u);
}

TEST_F(CcQueueTest, AParkedSlaveIsWokenBySubmitAndAnIdleOneTimesOut) {
  auto slave = NewClient();
  auto idle = CcClient(slave.get()).Take("s1", absl::Milliseconds(300));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_FALSE(idle->has_value());

  auto take = std::async(std::launch::async,
                         [&] { return CcClient(slave.get()).Take("s1", absl::Seconds(20)); });
  auto watcher = NewClient();
  ASSERT_TRUE(testing::WaitUntil([&] {
    absl::StatusOr<uint64_t> parked = testing::StatValue(*watcher, "parked.now");
    return parked.ok() && *parked == 1;  // the slave's take waits at the server
  }));
  auto submitted = SubmitAsync(7, "seven");
  auto job = take.get();
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
  EXPECT_EQ((*job)->id, 7u);
  ASSERT_TRUE(CcClient(slave.get()).Finish(7, "s1", false, "done").ok());
  EXPECT_EQ(submitted.get().value_or("?"), "done");
}

TEST_F(CcQueueTest, ASlaveThatGoesAwayGivesItsJobBack) {
  auto submitted = SubmitAsync(9, "nine");
  auto watcher = NewClient();
  WaitQueued(*watcher, 1);
  {
    auto dying = NewClient();
    auto job = CcClient(dying.get()).Take("dying", absl::Seconds(5));
    ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
    WaitQueued(*watcher, 0);
  }  // its connection closes: the close hook requeues the job
  auto other = NewClient();
  auto job = CcClient(other.get()).Take("healthy", absl::Seconds(10));
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
  EXPECT_EQ((*job)->id, 9u);
  ASSERT_TRUE(CcClient(other.get()).Finish(9, "healthy", false, "rescued").ok());
  EXPECT_EQ(submitted.get().value_or("?"), "rescued");
  auto st = CcClient(watcher.get()).Status();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->requeued, 1u);
}

TEST_F(CcQueueTest, ASubmitterThatGoesAwayWithdrawsItsJob) {
  auto watcher = NewClient();
  ASSERT_TRUE(EnsureLoaded(*watcher, active_libraries::cc()).ok());
  {
    // A submitter on a raw connection, closed while its job runs.
    ::ardma::testing::RawSocket submitter(server_->server().port());
    ASSERT_TRUE(submitter.ok());
    std::string args;
    wire::ByteWriter w(&args);
    w.U64(11);
    w.Bytes32("eleven");
    std::string payload;
    wire::ExecuteRequest req;
    req.function = "cc.submit";
    req.args = args;
    wire::EncodeExecuteRequest(req, &payload);
    ASSERT_TRUE(submitter.SendFrame(wire::Op::kExecute, payload, 1, 0));
    WaitQueued(*watcher, 1);
    auto slave = NewClient();
    auto job = CcClient(slave.get()).Take("s1", absl::Seconds(5));
    ASSERT_TRUE(job.ok() && job->has_value());
    EXPECT_EQ((*job)->id, 11u);
  }  // the submitter's connection closes: its job is withdrawn
  FarmStatus st;
  testing::WaitUntil([&] {
    auto got = CcClient(watcher.get()).Status();
    if (got.ok()) st = *got;
    return got.ok() && st.cancelled == 1;
  });
  EXPECT_EQ(st.cancelled, 1u);
  EXPECT_EQ(st.running, 0u);
  EXPECT_EQ(CcClient(watcher.get()).Finish(11, "s1", false, "late").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CcQueueTest, TheQueueNeedsActiveMode) {
  auto client = NewClient();
  std::string args(8, '\0');
  args += std::string("\4\0\0\0abcd", 8);
  auto r = Invoke(*client, Mode::kRdma, active_libraries::cc(), "cc.submit", args);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

}  // namespace
}  // namespace ardma::cc
