// An RDMA-mode client caches where its named objects live (RootCache). When the server loses its
// memory (restarted without a memory file), the cached addresses are stale: every service must
// notice (StaleRootError) and resolve the name again — the operation succeeds, once retried.
#include <memory>
#include <string>

#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/server/server.h"
#include "core/testing/test_server.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"
#include "services/dht/dht_table.h"
#include "services/list/list_client.h"
#include "services/lock/lock_client.h"

namespace ardma {
namespace {

class StaleRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(testing::TestServerOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(testing::ClientAddress(server_->address()));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  // A fresh, empty heap behind the same address; the client reconnects on its next call.
  void RestartWithoutMemory() {
    ServerOptions options = testing::TestServerOptions();
    options.listen = "127.0.0.1:" + std::to_string(server_->port());
    server_.reset();
    absl::StatusOr<std::unique_ptr<Server>> again = Server::Start(options);
    ASSERT_TRUE(again.ok()) << again.status();
    server_ = std::move(*again);
  }
  // Something else where the old objects were: another client's objects, made first.
  void Scribble() {
    absl::StatusOr<std::unique_ptr<Client>> other =
        Client::Connect(testing::ClientAddress(server_->address()));
    ASSERT_TRUE(other.ok()) << other.status();
    ASSERT_TRUE((*other)->Write(heap::kDataStart, std::string(64 << 10, '\x5a')).ok());
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(StaleRootTest, ListResolvesAgain) {
  list::ListClient lists(client_.get(), Mode::kRdma);
  ASSERT_TRUE(lists.Append("l", list::ListValue(int64_t{1})).ok());
  ASSERT_NO_FATAL_FAILURE(RestartWithoutMemory());
  ASSERT_NO_FATAL_FAILURE(Scribble());
  absl::Status appended = lists.Append("l", list::ListValue(int64_t{2}));
  ASSERT_TRUE(appended.ok()) << appended;
  EXPECT_EQ(*lists.Size("l"), 1u);  // a new list: the old one died with the memory
}

TEST_F(StaleRootTest, HashTableResolvesAgain) {
  // An active-mode client caches its table too (its keyed calls name no table the server must
  // look up): the server's stale answer crosses the wire and the client resolves again.
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    SCOPED_TRACE(mode == Mode::kActive ? "active" : "rdma");
    dht::DhtClient tables(client_.get(), mode);
    ASSERT_TRUE(tables.Put("t", "k", "v1").ok());
    ASSERT_NO_FATAL_FAILURE(RestartWithoutMemory());
    ASSERT_NO_FATAL_FAILURE(Scribble());
    absl::StatusOr<bool> created = tables.Put("t", "k", "v2");
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_TRUE(*created);
    EXPECT_EQ(*tables.Get("t", "k"), std::optional<std::string>("v2"));
  }
}

TEST_F(StaleRootTest, ACachedTableIsNeverAnotherTableMadeWhereItWas) {
  for (Mode mode : {Mode::kActive, Mode::kRdma}) {
    SCOPED_TRACE(mode == Mode::kActive ? "active" : "rdma");
    dht::DhtClient tables(client_.get(), mode);
    ASSERT_TRUE(tables.Put("t", "k", "mine").ok());
    ASSERT_NO_FATAL_FAILURE(RestartWithoutMemory());
    // In the new memory, another table's header lands where "t"'s was, and its buckets elsewhere:
    // a block of the bucket array's size is taken first.
    absl::StatusOr<std::unique_ptr<Client>> other =
        Client::Connect(testing::ClientAddress(server_->address()));
    ASSERT_TRUE(other.ok()) << other.status();
    RemoteContext ctx(other->get(), {});
    ASSERT_TRUE(
        heap::Allocate(ctx, ((uint64_t{1} << dht::kInitialLog2Buckets) + 1) * dht::kBucketBytes)
            .ok());
    dht::DhtClient theirs(other->get(), Mode::kActive);
    ASSERT_TRUE(theirs.Put("u", "k", "theirs").ok());
    // "t" is gone with the old memory: its key is not found, and never read from "u".
    absl::StatusOr<std::optional<std::string>> got = tables.Get("t", "k");
    EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
  }
}

TEST_F(StaleRootTest, LockResolvesAgain) {
  lock::LockClient locks(client_.get(), Mode::kRdma);
  absl::StatusOr<lock::Grant> g = locks.Acquire("m", lock::LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(locks.Release(*g).ok());
  ASSERT_NO_FATAL_FAILURE(RestartWithoutMemory());
  ASSERT_NO_FATAL_FAILURE(Scribble());
  absl::StatusOr<lock::Grant> again =
      locks.Acquire("m", lock::LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->token, 1u);  // the first grant of a new lock
  EXPECT_TRUE(locks.Release(*again).ok());
}

}  // namespace
}  // namespace ardma
