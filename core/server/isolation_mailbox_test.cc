// The mailbox between ardmad and an isolated worker (isolation_mailbox.h), with both sides in one
// process: turns pass both ways, a long payload follows on the socket, a waiter without the turn
// times out, and the peer's death (marked by hand, or seen by DeathWatch) wakes a waiter.
#include "core/server/isolation_mailbox.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace ardma {
namespace {

struct Pair {
  Pair() {
    absl::StatusOr<int> fd = Mailbox::CreateFile();
    EXPECT_TRUE(fd.ok());
    server = *Mailbox::Map(*fd, Mailbox::kServer);
    worker = *Mailbox::Map(*fd, Mailbox::kWorker);
    ::close(*fd);
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sockets), 0);
  }
  ~Pair() {
    ::close(sockets[0]);
    ::close(sockets[1]);
  }
  std::unique_ptr<Mailbox> server, worker;
  int sockets[2];
};

TEST(MailboxTest, TurnsPassBothWaysAndLongPayloadsFollowOnTheSocket) {
  Pair p;
  const std::string long_payload(Mailbox::kCapacity + 1, 'x');
  std::thread worker([&] {
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(p.worker->Await(absl::InfiniteFuture(), absl::ZeroDuration()),
                Mailbox::Wait::kTurn);
      Type type;
      std::string msg;
      ASSERT_TRUE(p.worker->Receive(&type, &msg, p.sockets[1]));
      ASSERT_EQ(type, kExec);
      ASSERT_TRUE(p.worker->Send(kDone, msg + "!", p.sockets[1]));
    }
  });
  for (int i = 0; i < 100; ++i) {
    std::string sent = i == 50 ? long_payload : std::to_string(i);
    ASSERT_TRUE(p.server->Send(kExec, sent, p.sockets[0]));
    ASSERT_EQ(p.server->Await(absl::Now() + absl::Seconds(10), absl::ZeroDuration()),
              Mailbox::Wait::kTurn);
    Type type;
    std::string msg;
    ASSERT_TRUE(p.server->Receive(&type, &msg, p.sockets[0]));
    EXPECT_EQ(type, kDone);
    EXPECT_TRUE(msg == sent + "!") << i;
  }
  worker.join();
}

TEST(MailboxTest, NotYourTurnTimesOutAndTheWatchersWordWakesASleeper) {
  Pair p;
  // The server holds the turn first: the worker waits, the server does not.
  EXPECT_EQ(p.worker->Await(absl::Now() + absl::Milliseconds(5), absl::ZeroDuration()),
            Mailbox::Wait::kTimeout);
  EXPECT_EQ(p.server->Await(absl::Now() + absl::Milliseconds(5), absl::ZeroDuration()),
            Mailbox::Wait::kTurn);
  ASSERT_TRUE(p.server->Send(kExec, "call", p.sockets[0]));
  std::thread dies([&] { p.server->PeerDied(); });  // (as DeathWatch does)
  EXPECT_EQ(p.server->Await(absl::InfiniteFuture(), absl::ZeroDuration()),
            Mailbox::Wait::kPeerDied);
  dies.join();
}

TEST(MailboxTest, ADeadWorkersProcessWakesTheWatch) {
  Pair p;
  absl::StatusOr<std::unique_ptr<DeathWatch>> watch = DeathWatch::Start();
  ASSERT_TRUE(watch.ok());
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  absl::StatusOr<uint64_t> handle = (*watch)->Watch(child, p.sockets[0], p.server.get());
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(p.server->Send(kExec, "call", p.sockets[0]));
  EXPECT_EQ(p.server->Await(absl::Now() + absl::Seconds(10), absl::ZeroDuration()),
            Mailbox::Wait::kPeerDied);
  (*watch)->Forget(*handle);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace ardma
