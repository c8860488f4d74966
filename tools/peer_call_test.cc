// Server-to-server calls (Context::CallPeer) between real ardmad members of a cluster kept in a
// real etcd, with authentication: a member's code reaches the owner of a slot and a member by id
// as a peer; a client that claims to be a peer is refused; the caller's deadline ends a slow
// callee's call; a member that is down fails the call with UNAVAILABLE naming it.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/active/testdata/test_library.h"
#include "core/client/client.h"
#include "core/client/invoke.h"
#include "core/cluster/admin.h"
#include "core/cluster/etcd_client.h"
#include "core/cluster/slot.h"
#include "core/testing/etcd_process.h"
#include "core/testing/server_process.h"
#include "core/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;
using testing::StatOf;
using testing::TempPath;
using testing::U64s;

constexpr char kAppSecret[] = "0123456789abcdef0123";

class PeerCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
    etcd_client_ = *cluster::EtcdClient::Connect(etcd_.endpoint());
    // The members call each other with the first secret granted `peer`; the application's secret
    // may do everything but that.
    auth_ = TempPath("peer.auth");
    std::ofstream(auth_) << "cluster fedcba9876543210fedc exec,peer\n"
                         << "app " << kAppSecret << " read,write,exec,load,admin\n";
    ::chmod(auth_.c_str(), 0600);
    const std::string cluster = absl::StrCat("etcd://", etcd_.endpoint(), "/c1");
    for (int i = 0; i < 3; ++i) {
      members_.push_back(std::make_unique<testing::ServerProcess>(
          std::vector<std::string>{"--memory", "16M", "--ucx", "off", "--auth-file", auth_,
                                   "--cluster", cluster, "--cluster-ttl", "2s"}));
      ASSERT_FALSE(members_.back()->address().empty());
    }
    absl::StatusOr<cluster::SlotMap> map = cluster::CreateMap(*etcd_client_, "c1", {});
    ASSERT_TRUE(map.ok()) << map.status();
    map_ = *map;
    absl::StatusOr<std::vector<cluster::MemberInfo>> members =
        cluster::ListMembers(*etcd_client_, "c1");
    ASSERT_TRUE(members.ok()) << members.status();
    for (int i = 0; i < 3; ++i) {
      clients_.push_back(Connect(i));
      ASSERT_NE(clients_.back(), nullptr);
      ASSERT_TRUE(EnsureLoaded(*clients_.back(), active_libraries::test()).ok());
      for (const cluster::MemberInfo& m : *members) {
        if (m.addresses.at("tcp") == members_[i]->address()) ids_.push_back(m.id);
      }
    }
    ASSERT_EQ(ids_.size(), 3u);
  }
  void TearDown() override { std::filesystem::remove(auth_); }

  std::unique_ptr<Client> Connect(int i) {
    ClientOptions options;
    options.credentials = security::Credentials{"app", kAppSecret};
    options.credentials_from_environment = false;
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(members_[i]->address(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  // A slot that member `i` owns.
  uint32_t SlotOf(int i) {
    for (uint32_t slot = 0; slot < cluster::kSlots; ++slot) {
      if (map_.Owner(slot) == ids_[i]) return slot;
    }
    ADD_FAILURE() << "member " << i << " owns no slot";
    return 0;
  }
  uint64_t Stat(int i, const char* name) { return StatOf(*clients_[i], name); }

  testing::EtcdProcess etcd_;
  std::unique_ptr<cluster::EtcdClient> etcd_client_;
  std::string auth_;
  std::vector<std::unique_ptr<testing::ServerProcess>> members_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::string> ids_;
  cluster::SlotMap map_;
};

TEST_F(PeerCallTest, AMembersCodeCallsTheOwnerOfASlotAndAMemberByIdAsAPeer) {
  // Asked directly, the function sees a client.
  EXPECT_EQ(*clients_[0]->Execute("test.who", ""), "client");
  // From member 0's code, by member id and by slot: the callee sees a peer.
  absl::StatusOr<std::string> by_id =
      clients_[0]->Execute("test.peer", absl::StrCat("member=", ids_[1], "\ntest.who\n"));
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ(*by_id, "peer");
  absl::StatusOr<std::string> by_slot =
      clients_[0]->Execute("test.peer", absl::StrCat("slot=", SlotOf(2), "\ntest.echo\nhello"));
  ASSERT_TRUE(by_slot.ok()) << by_slot.status();
  EXPECT_EQ(*by_slot, "hello");
  EXPECT_EQ(Stat(0, "peer.calls_out"), 2u);
  EXPECT_EQ(Stat(0, "peer.calls_in"), 0u);
  EXPECT_EQ(Stat(1, "peer.calls_in"), 1u);
  EXPECT_EQ(Stat(2, "peer.calls_in"), 1u);
  // The callee's error comes back as it was.
  absl::StatusOr<std::string> failed =
      clients_[0]->Execute("test.peer", absl::StrCat("member=", ids_[2], "\ntest.fail\n"));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument) << failed.status();
  // An unknown member: NOT a hang, an UNAVAILABLE that names it.
  absl::StatusOr<std::string> nobody =
      clients_[0]->Execute("test.peer", "member=0000000000000bad\ntest.who\n");
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable) << nobody.status();
  EXPECT_THAT(nobody.status().message(), HasSubstr("0000000000000bad"));
}

TEST_F(PeerCallTest, AClientClaimingToBeAPeerIsRefused) {
  CallOptions claim;
  claim.peer = true;
  absl::StatusOr<std::string> who = clients_[1]->Execute("test.who", "", claim);
  EXPECT_EQ(who.status().code(), absl::StatusCode::kPermissionDenied) << who.status();
  EXPECT_THAT(who.status().message(), HasSubstr("'peer' permission"));
  EXPECT_EQ(Stat(1, "peer.refused"), 1u);
  EXPECT_EQ(Stat(1, "peer.calls_in"), 0u);
}

TEST_F(PeerCallTest, TheCallersDeadlineEndsASlowCalleesCall) {
  // The callee sleeps 20 s; the request on member 0 has 1 s. Member 0 answers DEADLINE_EXCEEDED
  // when its 1 s is up (its client would wait 10 s).
  CallOptions options;
  options.timeout = absl::Seconds(10);
  options.server_deadline = absl::Seconds(1);
  std::string args = absl::StrCat("member=", ids_[1], "\ntest.sleep\n");
  args += U64s({20000});
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> slow = clients_[0]->Execute("test.peer", args, options);
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded) << slow.status();
  EXPECT_LT(took, absl::Seconds(8)) << "the peer call outlived its caller's deadline";
  // Member 0 goes on serving.
  EXPECT_EQ(*clients_[0]->Execute("test.who", ""), "client");
}

TEST_F(PeerCallTest, ACallToAMemberThatIsDownFailsWithUnavailableNamingIt) {
  members_[2]->Kill(SIGKILL);
  // At once (its address refuses), and after etcd has dropped it (its lease ran out).
  std::string args = absl::StrCat("slot=", SlotOf(2), "\ntest.who\n");
  absl::StatusOr<std::string> down = clients_[0]->Execute("test.peer", args);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_THAT(down.status().message(), HasSubstr(ids_[2]));
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        return cluster::ListMembers(*etcd_client_, "c1")
                   .value_or(std::vector<cluster::MemberInfo>())
                   .size() == 2;
      },
      absl::Seconds(15), absl::Milliseconds(100)));
  down = clients_[0]->Execute("test.peer", args);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_THAT(down.status().message(), HasSubstr(ids_[2]));
  // The other members' slots keep working.
  absl::StatusOr<std::string> up =
      clients_[0]->Execute("test.peer", absl::StrCat("slot=", SlotOf(1), "\ntest.who\n"));
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(*up, "peer");
}

TEST_F(PeerCallTest, AMemberKilledMidCallEndsTheCallWithUnavailableNamingIt) {
  // Member 0's code calls member 1, which sleeps 20 s in it; member 1 dies meanwhile.
  std::string args = absl::StrCat("member=", ids_[1], "\ntest.sleep\n");
  args += U64s({20000});
  std::future<absl::StatusOr<std::string>> call = std::async(
      std::launch::async, [&] { return clients_[0]->Execute("test.peer", args); });
  ASSERT_TRUE(testing::WaitUntil([&] { return Stat(1, "peer.calls_in") == 1; },
                                 absl::Seconds(10), absl::Milliseconds(10)));
  absl::Time killed = absl::Now();
  members_[1]->Kill(SIGKILL);
  ASSERT_EQ(call.wait_for(std::chrono::seconds(15)), std::future_status::ready)
      << "the caller hangs on a dead member";
  absl::StatusOr<std::string> r = call.get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(ids_[1]));
  RecordProperty("answered_after_kill_ms",
                 static_cast<int>((absl::Now() - killed) / absl::Milliseconds(1)));
  // Member 0 serves on, and calls member 2.
  absl::StatusOr<std::string> other =
      clients_[0]->Execute("test.peer", absl::StrCat("member=", ids_[2], "\ntest.who\n"));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, "peer");
}

TEST(PeerCallOutsideAClusterTest, CallPeerIsAClearErrorOnAServerOutsideACluster) {
  testing::ServerProcess alone({"--memory", "16M", "--ucx", "off"});
  ASSERT_FALSE(alone.address().empty());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(alone.address());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(EnsureLoaded(**client, active_libraries::test()).ok());
  absl::StatusOr<std::string> r = (*client)->Execute("test.peer", "slot=1\ntest.who\n");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("not a member of a cluster"));
}

}  // namespace
}  // namespace ardma
