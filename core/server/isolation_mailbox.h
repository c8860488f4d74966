// The fast way between ardmad and an isolated worker (isolation.h): a mailbox in shared memory,
// with a futex to sleep on, and a watcher that turns a worker's death into a wake-up.
//
// The conversation is one turn at a time: the server passes the turn with a call (or a library,
// or a reply), the worker passes it back with its answer (or a request of the server). The side
// that holds the turn owns the mailbox's buffer. Passing the turn is one atomic increment of the
// turn word, plus a FUTEX_WAKE only when the peer said it sleeps; waiting for it is a short spin
// (if asked) and then FUTEX_WAIT. A payload too long for the buffer follows on the worker's
// socket, which stays open for that, for starting and for the worker's last words (sandbox.h).
//
// The server trusts nothing in the mailbox: a worker may write any bytes into it at any time, so
// lengths are read once and checked, and a worker that breaks the protocol is killed.
#ifndef ARDMA_CORE_SERVER_ISOLATION_MAILBOX_H_
#define ARDMA_CORE_SERVER_ISOLATION_MAILBOX_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/server/isolation_channel.h"

namespace ardma {

class Mailbox {
 public:
  enum Side : uint32_t { kServer = 0, kWorker = 1 };
  // Payload bytes the buffer carries; a longer payload follows on the socket.
  static constexpr size_t kCapacity = size_t{256} << 10;
  // The longest payload either side accepts at all.
  static constexpr size_t kMaxPayload = size_t{1} << 30;

  // A new mailbox's file (a memfd, sized), for the server to map and the worker to inherit.
  static absl::StatusOr<int> CreateFile();
  // Maps the mailbox in `fd` (which the caller may close afterwards) as `side`.
  static absl::StatusOr<std::unique_ptr<Mailbox>> Map(int fd, Side side);
  ~Mailbox();

  // Passes the turn with a message; its payload follows on `socket` if the buffer is too small.
  // False if that write failed (the peer is gone).
  bool Send(Type type, std::string_view payload, int socket);

  enum class Wait { kTurn, kTimeout, kPeerDied };
  // Waits for the turn: spins for up to `spin`, then gives up the CPU for up to `yield` (for a
  // peer on the same CPU), then sleeps until `until`.
  Wait Await(absl::Time until, absl::Duration spin,
             absl::Duration yield = absl::ZeroDuration());
  // The message the peer passed the turn with (after Await said kTurn). False if it is malformed
  // or a payload on `socket` could not be read.
  bool Receive(Type* type, std::string* payload, int socket);

  // The peer died (the watcher says so): the waiter wakes, and Await says kPeerDied from now on.
  void PeerDied();

 private:
  struct Shared;
  Mailbox(Shared* shared, Side side) : shared_(shared), side_(side) {}
  bool Mine(uint32_t turn) const { return (turn & 1) == side_; }

  Shared* const shared_;
  const Side side_;
};

// Watches processes through pidfds on one thread: when one ends, or closes its end of its socket,
// its mailbox's waiter is woken (Mailbox::PeerDied).
class DeathWatch {
 public:
  static absl::StatusOr<std::unique_ptr<DeathWatch>> Start();
  ~DeathWatch();

  // Watches `pid` (a child not yet reaped) and its `socket` for `mailbox`; returns a handle for
  // Forget, or an error (no pidfds on this kernel).
  absl::StatusOr<uint64_t> Watch(pid_t pid, int socket, Mailbox* mailbox);
  // Stops watching; after it returns, the mailbox and the socket are not touched again.
  void Forget(uint64_t handle);

 private:
  DeathWatch(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}
  void Loop();

  struct Watched {
    int pidfd = -1;
    int socket = -1;
    Mailbox* mailbox = nullptr;
  };
  const int epoll_fd_, wake_fd_;
  absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Watched> watched_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_ISOLATION_MAILBOX_H_
