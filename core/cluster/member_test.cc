#include "core/cluster/member.h"

#include "absl/synchronization/mutex.h"
#include "core/testing/etcd_process.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cluster {
namespace {

using ::testing::HasSubstr;

TEST(ClusterAddressTest, ParsesEndpointsAndNameAndSaysWhatIsWrong) {
  absl::StatusOr<ClusterAddress> a = ParseClusterAddress("etcd://10.0.0.1:2379,10.0.0.2:2379/prod-1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->endpoints, "10.0.0.1:2379,10.0.0.2:2379");
  EXPECT_EQ(a->name, "prod-1");
  EXPECT_TRUE(IsClusterAddress("etcd://x:1/c"));
  EXPECT_FALSE(IsClusterAddress("127.0.0.1:15712"));
  EXPECT_THAT(ParseClusterAddress("http://x:1/c").status().message(),
              HasSubstr("does not start with etcd://"));
  EXPECT_THAT(ParseClusterAddress("etcd://x:1").status().message(), HasSubstr("names no etcd"));
  EXPECT_THAT(ParseClusterAddress("etcd://x:1/").status().message(), HasSubstr("names no cluster"));
  EXPECT_THAT(ParseClusterAddress("etcd://x:1/a b").status().message(),
              HasSubstr("letters, digits"));
}

class MemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
    etcd_client_ = *EtcdClient::Connect(etcd_.endpoint());
  }
  MemberOptions Options(std::string id) {
    MemberOptions o;
    o.where = {etcd_.endpoint(), "c1"};
    o.self = {std::move(id), {{"tcp", "127.0.0.1:7"}, {"ucx", "ucx://127.0.0.1:7"}}};
    o.ttl = absl::Seconds(2);
    o.retry_interval = absl::Milliseconds(20);
    return o;
  }
  std::vector<MemberInfo> Members() {
    std::vector<MemberInfo> out;
    absl::StatusOr<std::vector<KeyValue>> kvs = etcd_client_->GetPrefix(MembersPrefix("c1"));
    EXPECT_TRUE(kvs.ok()) << kvs.status();
    for (const KeyValue& kv : kvs.value_or(std::vector<KeyValue>())) {
      out.push_back(*MemberInfo::Parse(kv.value));
    }
    return out;
  }
  testing::EtcdProcess etcd_;
  std::unique_ptr<EtcdClient> etcd_client_;
};

TEST_F(MemberTest, RegistersOnceStaysWhileAliveAndLeavesAtOnce) {
  absl::StatusOr<std::unique_ptr<Member>> a = Member::Join(Options("a1"));
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<MemberInfo> members = Members();
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].id, "a1");
  EXPECT_EQ(members[0].addresses.at("ucx"), "ucx://127.0.0.1:7");
  // A second server with the same id is refused while the first lives.
  absl::StatusOr<std::unique_ptr<Member>> clash = Member::Join(Options("a1"));
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists) << clash.status();
  EXPECT_THAT(clash.status().message(), HasSubstr("127.0.0.1:7"));  // names the holder
  // Kept alive: renewed three times, every TTL/3, so past the 2 s TTL that would have dropped the
  // member without them.
  EXPECT_TRUE(testing::WaitUntil([&] { return (*a)->renewals() >= 3; }, absl::Seconds(20),
                                 absl::Milliseconds(20)));
  int64_t lease = (*etcd_client_->Get(MembersPrefix("c1") + "a1"))->lease;
  EXPECT_TRUE(etcd_client_->TimeToLive(lease).ok());
  EXPECT_EQ(Members().size(), 1u) << "the member fell out while alive";
  (*a)->Leave();
  EXPECT_TRUE(Members().empty());
  EXPECT_TRUE(Member::Join(Options("a1")).ok());  // the id is free again
}

// Self-fencing's clock (docs/cluster.md, "Replication"): the membership is reported held until
// a renewal's start plus the TTL less a third, from the join on and again at each renewal, and
// never past what the lease can last.
TEST_F(MemberTest, ReportsHowLongTheMembershipIsSurelyHeld) {
  absl::Mutex mu;
  std::vector<std::pair<absl::Time, absl::Time>> reports;  // (when, held until)
  MemberOptions options = Options("a1");
  options.on_lease = [&](absl::Time until) {
    absl::MutexLock lock(&mu);
    reports.push_back({absl::Now(), until});
  };
  const absl::Time before = absl::Now();
  absl::StatusOr<std::unique_ptr<Member>> a = Member::Join(options);
  ASSERT_TRUE(a.ok()) << a.status();
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(reports.size(), 1u) << "reported at the join";
    EXPECT_GE(reports[0].second, before + options.ttl * 2 / 3);
    EXPECT_LE(reports[0].second, reports[0].first + options.ttl * 2 / 3);
  }
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return reports.size() >= 3;
      },
      absl::Seconds(20), absl::Milliseconds(20)))
      << "reported at each renewal";
  absl::MutexLock lock(&mu);
  EXPECT_GE((*a)->renewals(), 2u);
  for (size_t i = 1; i < reports.size(); ++i) {
    EXPECT_GT(reports[i].second, reports[i - 1].second) << "each renewal extends it";
    EXPECT_LE(reports[i].second, reports[i].first + options.ttl * 2 / 3);
  }
}

// Through the watch: were the map polled, an hour would pass before it was read again.
TEST_F(MemberTest, FollowsTheSlotMapAndKeepsTheLastValidOne) {
  MemberOptions options = Options("a1");
  options.retry_interval = absl::Hours(1);
  absl::StatusOr<std::unique_ptr<Member>> a = Member::Join(options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->map(), nullptr);  // no map yet
  SlotMap one = SlotMap::AllTo("a1");
  ASSERT_TRUE(etcd_client_->Put(MapKey("c1"), one.ToJson()).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return (*a)->map() != nullptr; }));
  EXPECT_EQ((*a)->map()->epoch(), 1u);
  // A map written by hand with overlapping slots is not taken.
  ASSERT_TRUE(etcd_client_
                  ->Put(MapKey("c1"), R"({"epoch": 5, "ranges": [
                      {"first": 0, "last": 9000, "server": "a1"},
                      {"first": 8000, "last": 16383, "server": "b2"}]})")
                  .ok());
  SlotMap two = one.WithRange(8192, kSlots - 1, "b2");
  ASSERT_TRUE(etcd_client_->Put(MapKey("c1"), two.ToJson()).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return (*a)->map()->epoch() == 2; }));
  EXPECT_EQ((*a)->map()->Owner(kSlots - 1), "b2");
}

}  // namespace
}  // namespace ardma::cluster
