// The lock service against a real server, in both modes and mixed: mutual exclusion, FCFS order,
// shared overlap without writer starvation, leases and fencing tokens, disconnects, round trips.
// LockTest runs over one server and (TRANSPORTS cluster) over a 3-server cluster.
#include <algorithm>
#include <future>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/active/native_loader.h"
#include "core/client/remote_context.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "core/testing/service_fixture.h"
#include "core/testing/wait_until.h"
#include "core/ucx/ucx_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dht/dht_client.h"
#include "services/lock/lock_client.h"
#include "services/lock/lock.h"
#include "services/lock/lock_format.h"

namespace ardma::lock {
namespace {

using ::testing::ElementsAre;

class LockTest : public testing::ServiceFixture<::testing::TestWithParam<Mode>> {
 protected:
  void SetUp() override { Start(testing::TestServerOptions()); }
  void Start(const ServerOptions& options) {
    StartServices(options);
    locks_ = std::make_unique<LockClient>(servers(), GetParam());
  }
  // Polls until `name` has `waiters` waiters (bounded: fails the test after ~10 s).
  void AwaitWaiters(std::string_view name, uint64_t waiters) {
    LockClient inspector(servers(), Mode::kActive);
    absl::Status inspected;
    bool seen = testing::WaitUntil(
        [&] {
          absl::StatusOr<LockState> s = inspector.Inspect(name);
          inspected = s.status();
          return !s.ok() || s->waiters == waiters;
        },
        absl::Seconds(10));
    ASSERT_TRUE(inspected.ok()) << inspected;
    ASSERT_TRUE(seen) << "never saw " << waiters << " waiters on " << name;
  }
  LockState State(std::string_view name) {
    absl::StatusOr<LockState> s = LockClient(servers(), Mode::kActive).Inspect(name);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.value_or(LockState{});
  }
  // A fresh 8-byte counter in server memory.
  uint64_t NewCounter() {
    RemoteContext ctx(client_.get(), {});
    absl::StatusOr<uint64_t> addr = heap::Allocate(ctx, 64);
    EXPECT_TRUE(addr.ok()) << addr.status();
    EXPECT_TRUE(ctx.WriteU64(*addr, 0).ok());
    return *addr;
  }
  // N clients x M read-increment-write rounds under the lock; modes[i] is client i's mode. The
  // counter is in the memory of client_'s server.
  void CountUnderLock(const std::vector<Mode>& modes, int rounds) {
    uint64_t counter = NewCounter();
    std::vector<std::unique_ptr<Servers>> lockers;
    std::vector<std::unique_ptr<Client>> clients;
    for (size_t i = 0; i < modes.size(); ++i) {
      lockers.push_back(NewServers());
      clients.push_back(NewClient());
    }
    std::vector<std::thread> threads;
    for (size_t i = 0; i < modes.size(); ++i) {
      threads.emplace_back([&, i] {
        LockClient locks(lockers[i].get(), modes[i]);
        for (int r = 0; r < rounds; ++r) {
          absl::StatusOr<LockGuard> guard =
              LockGuard::Acquire(locks, "counter", LockMode::kExclusive, absl::Seconds(60));
          ASSERT_TRUE(guard.ok()) << guard.status();
          RemoteContext ctx(clients[i].get(), {});
          absl::StatusOr<uint64_t> v = ctx.ReadU64(counter);
          ASSERT_TRUE(v.ok());
          ASSERT_TRUE(ctx.WriteU64(counter, *v + 1).ok());
          ASSERT_TRUE(guard->Release().ok());
        }
      });
    }
    for (auto& t : threads) t.join();
    RemoteContext ctx(client_.get(), {});
    EXPECT_EQ(*ctx.ReadU64(counter), modes.size() * rounds);
  }

  std::unique_ptr<LockClient> locks_;
};

INSTANTIATE_TEST_SUITE_P(Modes, LockTest, ::testing::Values(Mode::kActive, Mode::kRdma),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

TEST_P(LockTest, AcquireTryReleaseAndIncreasingTokens) {
  std::unique_ptr<Servers> other_client = NewServers();
  LockClient other(other_client.get(), GetParam());
  absl::StatusOr<Grant> first = locks_->Acquire("a", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->name, "a");
  EXPECT_GT(first->lease_deadline, absl::Now());
  EXPECT_EQ(*other.TryAcquire("a", LockMode::kExclusive), std::nullopt);
  EXPECT_EQ(*other.TryAcquire("a", LockMode::kShared), std::nullopt);
  LockState s = State("a");
  EXPECT_EQ(s.holders, 1u);
  EXPECT_EQ(s.waiters, 0u);  // tries give their tickets back
  ASSERT_TRUE(locks_->Release(*first).ok());
  EXPECT_EQ(locks_->Release(*first).code(), absl::StatusCode::kFailedPrecondition);
  uint64_t last = first->token;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::optional<Grant>> g = other.TryAcquire("a", LockMode::kExclusive);
    ASSERT_TRUE(g.ok() && g->has_value()) << g.status();
    EXPECT_GT((*g)->token, last);  // the fencing token grows on every grant
    last = (*g)->token;
    ASSERT_TRUE(other.Release(**g).ok());
  }
  // Locks are independent.
  absl::StatusOr<Grant> b = locks_->Acquire("b", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(other.TryAcquire("c", LockMode::kExclusive)->has_value());
}

TEST_P(LockTest, Errors) {
  EXPECT_EQ(locks_->Acquire("", LockMode::kExclusive, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      locks_->Acquire(std::string(kMaxNameBytes + 1, 'n'), LockMode::kShared, absl::Seconds(1))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(locks_->Acquire("x", LockMode::kExclusive, absl::Seconds(1), absl::Milliseconds(1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(locks_->Acquire("x", LockMode::kExclusive, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A wait that runs out gives its ticket back: the lock is free again once the holder leaves.
  absl::StatusOr<Grant> held = locks_->Acquire("x", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(held.ok());
  std::unique_ptr<Servers> other_client = NewServers();
  LockClient other(other_client.get(), GetParam());
  EXPECT_EQ(other.Acquire("x", LockMode::kExclusive, absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(State("x").waiters, 0u);
  ASSERT_TRUE(locks_->Release(*held).ok());
  EXPECT_TRUE(other.TryAcquire("x", LockMode::kExclusive)->has_value());
}

TEST_P(LockTest, MutualExclusionUnderContention) {
  CountUnderLock({GetParam(), GetParam(), GetParam(), GetParam()}, 40);
}

TEST_P(LockTest, TwoClientsHandTheLockBackAndForthManyTimes) {
  // Every hand-off races a releaser's resume against the waiter's look after parking.
  CountUnderLock({GetParam(), GetParam()}, 500);
}

TEST_P(LockTest, WaitersAreServedInArrivalOrder) {
  absl::StatusOr<Grant> holder = locks_->Acquire("fifo", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(holder.ok());
  constexpr int kWaiters = 5;
  std::vector<std::unique_ptr<Servers>> clients;
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(NewServers());
    threads.emplace_back([&, i] {
      LockClient locks(clients[i].get(), GetParam());
      absl::StatusOr<Grant> g = locks.Acquire("fifo", LockMode::kExclusive, absl::Seconds(60));
      ASSERT_TRUE(g.ok()) << g.status();
      {
        absl::MutexLock lock(&mu);
        order.push_back(i);
      }
      ASSERT_TRUE(locks.Release(*g).ok());
    });
    AwaitWaiters("fifo", i + 1);  // queued in a known order
  }
  ASSERT_TRUE(locks_->Release(*holder).ok());
  for (auto& t : threads) t.join();
  EXPECT_THAT(order, ElementsAre(0, 1, 2, 3, 4));
}

TEST_P(LockTest, ReadersShareButDoNotOvertakeAWaitingWriter) {
  std::unique_ptr<Servers> c2 = NewServers(), c3 = NewServers(), c4 = NewServers();
  LockClient reader2(c2.get(), GetParam()), writer(c3.get(), GetParam()),
      late_reader(c4.get(), GetParam());
  absl::StatusOr<Grant> r1 = locks_->Acquire("rw", LockMode::kShared, absl::Seconds(5));
  ASSERT_TRUE(r1.ok());
  absl::StatusOr<std::optional<Grant>> r2 = reader2.TryAcquire("rw", LockMode::kShared);
  ASSERT_TRUE(r2.ok() && r2->has_value());  // readers overlap
  EXPECT_EQ(State("rw").holders, 2u);
  ASSERT_TRUE(reader2.Release(**r2).ok());

  std::future<absl::StatusOr<Grant>> w = std::async(std::launch::async, [&] {
    return writer.Acquire("rw", LockMode::kExclusive, absl::Seconds(60));
  });
  AwaitWaiters("rw", 1);
  // A reader arriving after the writer waits behind it, though the holder is a reader too.
  EXPECT_EQ(*late_reader.TryAcquire("rw", LockMode::kShared), std::nullopt);
  std::future<absl::StatusOr<Grant>> late = std::async(std::launch::async, [&] {
    return late_reader.Acquire("rw", LockMode::kShared, absl::Seconds(60));
  });
  AwaitWaiters("rw", 2);
  ASSERT_TRUE(locks_->Release(*r1).ok());
  absl::StatusOr<Grant> wg = w.get();
  ASSERT_TRUE(wg.ok()) << wg.status();
  EXPECT_EQ(late.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  LockState s = State("rw");
  EXPECT_EQ(s.holders, 1u);
  EXPECT_EQ(s.waiters, 1u);
  ASSERT_TRUE(writer.Release(*wg).ok());
  absl::StatusOr<Grant> lg = late.get();
  ASSERT_TRUE(lg.ok()) << lg.status();
  EXPECT_GT(lg->token, wg->token);
}

TEST_P(LockTest, AnExpiredLeaseHandsTheLockOnAndTheOldHolderLearnsIt) {
  absl::StatusOr<Grant> old =
      locks_->Acquire("lease", LockMode::kExclusive, absl::Seconds(5), absl::Milliseconds(200));
  ASSERT_TRUE(old.ok());
  std::unique_ptr<Servers> other_client = NewServers();
  LockClient other(other_client.get(), GetParam());
  absl::Time start = absl::Now();
  absl::StatusOr<Grant> next = other.Acquire("lease", LockMode::kExclusive, absl::Seconds(30));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));  // not before the lease ran out
  EXPECT_GT(next->token, old->token);
  EXPECT_EQ(locks_->Release(*old).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(locks_->Renew(*old).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(other.Release(*next).ok());
}

// A taker that died between taking its ticket (FETCH_ADD on the tail) and describing it in its
// slot: its ticket expires after a short grace, not a default lease (10 s) that would outlast
// every waiter with a shorter wait (a server SIGKILLed mid-request left one; the chaos test).
TEST_P(LockTest, ATicketItsTakerNeverDescribedExpiresQuickly) {
  absl::StatusOr<Grant> first =
      locks_->Acquire("undescribed", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(locks_->Release(*first).ok());
  absl::StatusOr<Client*> holder = servers()->For(kLockSpace, "undescribed");
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE((*holder)->FetchAdd(first->addr + lock::kTailOffset, 1).ok());  // the dead taker
  absl::Time start = absl::Now();
  absl::StatusOr<Grant> next =
      locks_->Acquire("undescribed", LockMode::kExclusive, absl::Seconds(4));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));  // not before the grace
  EXPECT_EQ(next->ticket, first->ticket + 2);
  ASSERT_TRUE(locks_->Release(*next).ok());
}

TEST_P(LockTest, RenewingKeepsTheLock) {
  absl::StatusOr<Grant> g =
      locks_->Acquire("renew", LockMode::kExclusive, absl::Seconds(5), absl::Seconds(2));
  ASSERT_TRUE(g.ok());
  std::unique_ptr<Servers> other_client = NewServers();
  LockClient other(other_client.get(), GetParam());
  std::future<absl::Status> waiter = std::async(std::launch::async, [&] {
    return other.Acquire("renew", LockMode::kExclusive, absl::Seconds(3)).status();
  });
  // Renew well inside the lease for longer than the lease.
  for (int i = 0; i < 15; ++i) {
    absl::SleepFor(absl::Milliseconds(200));  // under test: the renewal cadence
    absl::Time before = absl::Now();
    ASSERT_TRUE(locks_->Renew(*g, absl::Seconds(2)).ok());
    EXPECT_GE(g->lease_deadline, before + absl::Seconds(2));
  }
  EXPECT_EQ(waiter.get().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(locks_->Release(*g).ok());
}

TEST_P(LockTest, RoundTrips) {
  // Warm up: code shipped, names resolved.
  ASSERT_TRUE(locks_->Release(*locks_->Acquire("rt", LockMode::kExclusive, absl::Seconds(5))).ok());
  uint64_t before = testing::RoundTrips(*servers());
  absl::StatusOr<Grant> g = locks_->Acquire("rt", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(g.ok());
  uint64_t acquire = testing::RoundTrips(*servers()) - before;
  ASSERT_TRUE(locks_->Release(*g).ok());
  uint64_t release = testing::RoundTrips(*servers()) - before - acquire;
  if (GetParam() == Mode::kActive) {
    EXPECT_EQ(acquire, 1u);
    EXPECT_EQ(release, 1u);
  } else {
    EXPECT_EQ(acquire, 4u);  // READ, FETCH_ADD ticket, FETCH_ADD token, CAS the slot held
    EXPECT_EQ(release, 2u);  // CAS the slot released, READ for waiters to wake
  }
  if (GetParam() != Mode::kActive) return;
  // Contended: the waiter's acquire is still one round trip.
  std::unique_ptr<Servers> waiter_client = NewServers();
  LockClient waiter(waiter_client.get(), Mode::kActive);
  ASSERT_TRUE(waiter.Release(*waiter.Acquire("rt", LockMode::kShared, absl::Seconds(5))).ok());
  absl::StatusOr<Grant> holder = locks_->Acquire("rt", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(holder.ok());
  uint64_t w0 = testing::RoundTrips(*waiter_client);
  std::future<absl::StatusOr<Grant>> w = std::async(std::launch::async, [&] {
    return waiter.Acquire("rt", LockMode::kExclusive, absl::Seconds(60));
  });
  AwaitWaiters("rt", 1);
  ASSERT_TRUE(locks_->Release(*holder).ok());
  absl::StatusOr<Grant> wg = w.get();
  ASSERT_TRUE(wg.ok()) << wg.status();
  EXPECT_EQ(testing::RoundTrips(*waiter_client) - w0, 1u);
}

// Sealing, as a cluster's mover does before a lock's slot leaves the server: takers are turned
// away (here, with no other server to go to, until their timeout), tickets from before the seal
// go on, and once unsealed the lock goes on from where it stopped, as if nobody had come by.
TEST_P(LockTest, ASealedLockTurnsTakersAwayAndServesAgainWhereItStopped) {
  ARDMA_SKIP_ON_CLUSTER("seals the lock on one server directly");
  absl::StatusOr<Grant> held = locks_->Acquire("s", LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(held.ok()) << held.status();
  RemoteContext ctx(client_.get(), {&active_libraries::lock()});
  absl::StatusOr<SealedLock> sealed = Seal(ctx, "s");
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->tail, 1u);
  EXPECT_EQ(Seal(ctx, "never-made").status().code(), absl::StatusCode::kNotFound);
  LeaseWatch watch;
  EXPECT_FALSE(*Drained(ctx, *sealed, watch));
  LockClient impatient(servers(), GetParam(), CallOptions{.timeout = absl::Milliseconds(300)});
  EXPECT_EQ(impatient.TryAcquire("s", LockMode::kExclusive).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(impatient.Inspect("s").status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(locks_->Release(*held).ok());  // a ticket from before the seal goes on
  EXPECT_TRUE(*Drained(ctx, *sealed, watch));
  EXPECT_EQ(sealed->fence, 1u);
  ASSERT_TRUE(Unseal(ctx, sealed->addr).ok());
  absl::StatusOr<std::optional<Grant>> again = impatient.TryAcquire("s", LockMode::kExclusive);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ((*again)->ticket, 1u);  // the takers turned away left no ticket behind
  EXPECT_EQ((*again)->token, 2u);
  EXPECT_EQ(State("s").tickets_taken, 2u);
}

// A lock adopted from another server goes on from the next ticket and the token count it came
// with (onto a fresh block, or onto the block it left here when it moved away before).
TEST_P(LockTest, AnAdoptedLockGoesOnFromTheTicketAndTokenItCameWith) {
  ARDMA_SKIP_ON_CLUSTER("adopts the lock on one server directly");
  RemoteContext ctx(client_.get(), {&active_libraries::lock()});
  absl::StatusOr<uint64_t> addr = Adopt(ctx, {.name = "adopted", .tail = 1000, .fence = 77});
  ASSERT_TRUE(addr.ok()) << addr.status();
  LockClient impatient(servers(), GetParam(), CallOptions{.timeout = absl::Milliseconds(300)});
  EXPECT_EQ(impatient.TryAcquire("adopted", LockMode::kExclusive).status().code(),
            absl::StatusCode::kDeadlineExceeded);  // sealed until the slot is served here
  ASSERT_TRUE(Unseal(ctx, *addr).ok());
  auto take = [&](uint64_t ticket, uint64_t token) {
    absl::StatusOr<Grant> g = locks_->Acquire("adopted", LockMode::kExclusive, absl::Seconds(5));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->ticket, ticket);
    EXPECT_EQ(g->token, token);
    ASSERT_TRUE(locks_->Release(*g).ok());
  };
  for (uint64_t i = 0; i < 3; ++i) take(1000 + i, 78 + i);
  ASSERT_TRUE(Seal(ctx, "adopted").ok());  // it moves away ...
  absl::StatusOr<uint64_t> back = Adopt(ctx, {.name = "adopted", .tail = 5000, .fence = 900});
  ASSERT_TRUE(back.ok()) << back.status();  // ... and comes back, onto its old block
  EXPECT_EQ(*back, *addr);
  ASSERT_TRUE(Unseal(ctx, *back).ok());
  take(5000, 901);
  // A lock served here is not adopted over.
  EXPECT_EQ(Adopt(ctx, {.name = "adopted", .tail = 1, .fence = 1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Every combination at once: active and RDMA mode, over TCP and over UCX.
TEST(LockMixedTest, MutualExclusionAndOrderWithModesAndTransportsMixed) {
  auto server = testing::TestServer::Start();
  ASSERT_TRUE(server.ok());
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    std::string address = (*server)->address();
    if (i / 2 == 1 && (*server)->server().ucx() != nullptr) {
      address = absl::StrCat(ToAbsl(kUcxPrefix), address);
    }
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(address);
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  uint64_t counter;
  {
    RemoteContext ctx(clients[0].get(), {});
    counter = *heap::Allocate(ctx, 64);
    ASSERT_TRUE(ctx.WriteU64(counter, 0).ok());
  }
  absl::Mutex tokens_mu;
  std::vector<uint64_t> tokens;  // every grant's fencing token
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      LockClient locks(clients[i].get(), i % 2 == 0 ? Mode::kActive : Mode::kRdma);
      RemoteContext ctx(clients[i].get(), {});
      for (int r = 0; r < 40; ++r) {
        absl::StatusOr<Grant> g = locks.Acquire("mixed", LockMode::kExclusive, absl::Seconds(60));
        ASSERT_TRUE(g.ok()) << g.status();
        {
          absl::MutexLock lock(&tokens_mu);
          tokens.push_back(g->token);
        }
        uint64_t v = *ctx.ReadU64(counter);
        ASSERT_TRUE(ctx.WriteU64(counter, v + 1).ok());
        ASSERT_TRUE(locks.Release(*g).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  RemoteContext ctx(clients[4].get(), {});
  EXPECT_EQ(*ctx.ReadU64(counter), 160u);
  // Every grant got its own token, handed out in one order across modes and transports.
  std::sort(tokens.begin(), tokens.end());
  ASSERT_EQ(tokens.size(), 160u);
  for (size_t i = 1; i < tokens.size(); ++i) EXPECT_EQ(tokens[i], tokens[i - 1] + 1);
}

class LockDisconnectTest : public testing::ServerFixture<::testing::Test> {
 protected:
  void SetUp() override { StartServer(); }
};

TEST_F(LockDisconnectTest, AClosedConnectionReleasesItsLocksAndWaitsAtOnce) {
  std::unique_ptr<Client> holder_client = *server_->NewClient();
  std::unique_ptr<Client> main_client = *server_->NewClient();
  LockClient main(main_client.get(), Mode::kActive);
  {
    LockClient holder(holder_client.get(), Mode::kActive);
    ASSERT_TRUE(
        holder.Acquire("gone", LockMode::kExclusive, absl::Seconds(5), absl::Hours(1)).ok());
  }
  // A waiter whose connection closes gives its place up.
  std::unique_ptr<Client> quitter = *server_->NewClient();
  ASSERT_TRUE(EnsureLoaded(*quitter, active_libraries::lock()).ok());
  std::future<absl::StatusOr<std::string>> quit_wait = quitter->ExecuteAsync(
      "lock.acquire", EncodeAcquireArgs({.name = "gone", .wait = absl::Seconds(60)}));
  testing::WaitUntil([&] { return main.Inspect("gone")->waiters >= 1; }, absl::Seconds(10));
  ASSERT_EQ(main.Inspect("gone")->waiters, 1u);
  quitter.reset();
  EXPECT_FALSE(quit_wait.get().ok());
  testing::WaitUntil([&] { return main.Inspect("gone")->waiters == 0; }, absl::Seconds(10));
  EXPECT_EQ(main.Inspect("gone")->waiters, 0u);
  EXPECT_EQ(main.Inspect("gone")->holders, 1u);
  // The holder's connection closes: its hour-long lease does not matter.
  holder_client.reset();
  absl::StatusOr<Grant> g = main.Acquire("gone", LockMode::kExclusive, absl::Seconds(30));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(main.Release(*g).ok());
}

// The lock library, like many C++ libraries, has STB_GNU_UNIQUE symbols, so dlclose leaves it
// mapped. Dropping it and loading other bytes into the reused memfd number must still give the
// other library (glibc finds loaded objects by path): this once made concurrent first uses of the
// lock and dht libraries fail with "LOAD names library 'dht' but the code defines 'lock'".
TEST(NativeLoaderTest, CodeThatStaysMappedIsNeverHandedOutForOtherBytes) {
  NativeLoader loader;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<LoadedLibrary>> first =
        loader.Load("", active_libraries::lock().code());
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ((*first)->name(), "lock");
    first->reset();
    absl::StatusOr<std::unique_ptr<LoadedLibrary>> second =
        loader.Load("", active_libraries::dht().code());
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ((*second)->name(), "dht");
  }
}

}  // namespace
}  // namespace ardma::lock
