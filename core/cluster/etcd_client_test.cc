#include "core/cluster/etcd_client.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/testing/etcd_process.h"
#include "core/testing/scripted_server.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cluster {
namespace {

using ::ardma::testing::ScriptedServer;
using ::testing::HasSubstr;

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start (is etcd-server installed?)";
    absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(etcd_.endpoint());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  testing::EtcdProcess etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, KeysAreWrittenReadListedAndDeleted) {
  ASSERT_TRUE(client_->Put("/ardma/t/a", std::string("one\0two", 7)).ok());
  ASSERT_TRUE(client_->Put("/ardma/t/b", "2").ok());
  ASSERT_TRUE(client_->Put("/ardma/u", "3").ok());
  absl::StatusOr<std::optional<KeyValue>> a = client_->Get("/ardma/t/a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->value, std::string("one\0two", 7));  // bytes, not text
  EXPECT_GT((*a)->mod_revision, 0);
  int64_t revision = 0;
  absl::StatusOr<std::vector<KeyValue>> listed = client_->GetPrefix("/ardma/t/", &revision);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, "/ardma/t/a");
  EXPECT_EQ((*listed)[1].key, "/ardma/t/b");
  EXPECT_GE(revision, (*listed)[1].mod_revision);
  ASSERT_TRUE(client_->Delete("/ardma/t/a").ok());
  EXPECT_FALSE(client_->Get("/ardma/t/a")->has_value());
  EXPECT_FALSE(client_->Get("/never/written")->has_value());
}

// A watch reports every change under its prefix from the revision it starts at (so a change
// between a read and the watch is not missed), nothing outside it, wakes when asked, and ends
// when etcd goes away.
TEST_F(EtcdClientTest, AWatchReportsTheChangesUnderItsPrefixFromItsRevision) {
  ASSERT_TRUE(client_->Put("/w/a", "1").ok());
  int64_t revision = 0;
  ASSERT_TRUE(client_->GetPrefix("/w/", &revision).ok());
  ASSERT_TRUE(client_->Put("/w/b", "2").ok());  // after the read, before the watch
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = client_->Watch("/w/", revision + 1);
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_EQ(*(*watch)->Next(absl::Seconds(10)), revision + 1);
  EXPECT_EQ(*(*watch)->Next(absl::Milliseconds(200)), 0);
  ASSERT_TRUE(client_->Put("/x/outside", "3").ok());
  EXPECT_EQ(*(*watch)->Next(absl::Milliseconds(300)), 0);
  ASSERT_TRUE(client_->Delete("/w/a").ok());
  EXPECT_EQ(*(*watch)->Next(absl::Seconds(10)), revision + 3);
  // Woken from another thread, a wait without end returns (else this test would hang), whether
  // the wake comes before the wait or during it.
  std::thread waker([&] { (*watch)->Wake(); });
  EXPECT_EQ(*(*watch)->Next(absl::InfiniteDuration()), 0);
  waker.join();
  etcd_.Kill(SIGKILL);
  EXPECT_EQ((*watch)->Next(absl::Seconds(10)).status().code(), absl::StatusCode::kUnavailable);
}

// Two admins read the same revision and both try to change the key: exactly one wins.
TEST_F(EtcdClientTest, PutIfLetsOneOfTwoConcurrentWritersWin) {
  absl::StatusOr<bool> created = client_->PutIf("/ardma/map", 0, "v1");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(*created);
  EXPECT_FALSE(*client_->PutIf("/ardma/map", 0, "again"));  // it exists now
  int64_t seen = (*client_->Get("/ardma/map"))->mod_revision;
  std::vector<std::string> winners;
  absl::Mutex mu;
  std::vector<std::thread> admins;
  for (const char* value : {"left", "right"}) {
    admins.emplace_back([&, value] {
      std::unique_ptr<EtcdClient> own = *EtcdClient::Connect(etcd_.endpoint());
      absl::StatusOr<bool> won = own->PutIf("/ardma/map", seen, value);
      ASSERT_TRUE(won.ok()) << won.status();
      if (*won) {
        absl::MutexLock lock(&mu);
        winners.push_back(value);
      }
    });
  }
  for (std::thread& t : admins) t.join();
  ASSERT_EQ(winners.size(), 1u);
  EXPECT_EQ((*client_->Get("/ardma/map"))->value, winners[0]);
}

// A decision taken on a read of a range stands only while no key of the range was put since:
// failover's controller must not write a map made without a member that registered after it read.
TEST_F(EtcdClientTest, PutIfUnchangedFailsOnceAKeyOfTheRangeWasPutAfterTheRead) {
  ASSERT_TRUE(client_->Put("/ardma/members/a", "1").ok());
  int64_t read = 0;
  ASSERT_TRUE(client_->GetPrefix("/ardma/members/", &read).ok());
  ASSERT_TRUE(client_->Put("/ardma/other", "outside the range").ok());
  absl::StatusOr<bool> put =
      client_->PutIf("/ardma/map", 0, "v1", EtcdClient::Unchanged{"/ardma/members/", read});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_TRUE(*put);
  const int64_t map = (*client_->Get("/ardma/map"))->mod_revision;
  ASSERT_TRUE(client_->Put("/ardma/members/b", "2").ok());  // a member registers
  put = client_->PutIf("/ardma/map", map, "v2", EtcdClient::Unchanged{"/ardma/members/", read});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_FALSE(*put);
  EXPECT_EQ((*client_->Get("/ardma/map"))->value, "v1");
  ASSERT_TRUE(client_->GetPrefix("/ardma/members/", &read).ok());  // read again: it stands
  EXPECT_TRUE(
      *client_->PutIf("/ardma/map", map, "v2", EtcdClient::Unchanged{"/ardma/members/", read}));
  ASSERT_TRUE(client_->Delete("/ardma/members/a").ok());  // a member leaving is no new member
  EXPECT_TRUE(*client_->PutIf("/ardma/map", (*client_->Get("/ardma/map"))->mod_revision, "v3",
                              EtcdClient::Unchanged{"/ardma/members/", read}));
}

TEST_F(EtcdClientTest, AKeyOnALeaseGoesWhenTheLeaseIsNotKeptAlive) {
  absl::StatusOr<int64_t> lease = client_->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/ardma/members/1", "alive", *lease).ok());
  EXPECT_EQ((*client_->Get("/ardma/members/1"))->lease, *lease);
  absl::StatusOr<absl::Duration> ttl = client_->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GE(*ttl, absl::Seconds(1));  // etcd raises a TTL below its minimum (2 s by default)
  EXPECT_LE(*ttl, absl::Seconds(3));
  // No more keep-alives: etcd drops the lease and its key.
  EXPECT_TRUE(testing::WaitUntil([&] { return !client_->Get("/ardma/members/1")->has_value(); },
                                 absl::Seconds(10), absl::Milliseconds(100)));
  EXPECT_EQ(client_->KeepAlive(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client_->RevokeLease(*lease).ok());  // gone already: nothing to do
  // A revoked lease takes its keys at once.
  int64_t second = *client_->GrantLease(absl::Seconds(60));
  ASSERT_TRUE(client_->Put("/ardma/members/2", "alive", second).ok());
  ASSERT_TRUE(client_->RevokeLease(second).ok());
  EXPECT_FALSE(client_->Get("/ardma/members/2")->has_value());
}

TEST_F(EtcdClientTest, AnotherEndpointIsTriedAndAStoppedEtcdIsUnavailableUntilItIsBack) {
  // The first endpoint is down: the second answers.
  absl::StatusOr<std::unique_ptr<EtcdClient>> two =
      EtcdClient::Connect(absl::StrCat("127.0.0.1:1,", etcd_.endpoint()));
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE((*two)->Put("/ardma/k", "kept").ok());
  etcd_.Kill(SIGKILL);
  absl::Status down = (*two)->Put("/ardma/k", "lost");
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_THAT(down.message(), HasSubstr("unreachable"));
  ASSERT_TRUE(etcd_.Restart());
  absl::StatusOr<std::optional<KeyValue>> back = (*two)->Get("/ardma/k");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->value, "kept");
}

// A listener on 127.0.0.1:0 that answers every connection with `reply` and closes it.
std::function<void(int, int)> Answer(std::string reply) {
  return [reply](int fd, int) {
    char buf[4096];
    (void)::recv(fd, buf, sizeof(buf), 0);
    (void)::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
  };
}

TEST(EtcdClientErrorsTest, NothingListeningNotEtcdAndBadEndpointsAreClearErrors) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> down =
      EtcdClient::Connect("127.0.0.1:1", absl::Milliseconds(500));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_THAT(down.status().message(), HasSubstr("etcd at 127.0.0.1:1 is unreachable"));

  ScriptedServer web(
      Answer("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"));
  absl::StatusOr<std::unique_ptr<EtcdClient>> not_etcd = EtcdClient::Connect(web.endpoint());
  EXPECT_EQ(not_etcd.status().code(), absl::StatusCode::kFailedPrecondition) << not_etcd.status();
  EXPECT_THAT(not_etcd.status().message(), HasSubstr("does not answer as etcd"));

  ScriptedServer binary(Answer(std::string("RDM1\x01\x02\x03\x00", 8)));
  absl::StatusOr<std::unique_ptr<EtcdClient>> not_http = EtcdClient::Connect(binary.endpoint());
  EXPECT_EQ(not_http.status().code(), absl::StatusCode::kFailedPrecondition) << not_http.status();

  EXPECT_EQ(EtcdClient::Connect("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(EtcdClient::Connect("http://x:1").status().message(), HasSubstr("not HOST:PORT"));
}

}  // namespace
}  // namespace ardma::cluster
