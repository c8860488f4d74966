#include "core/server/isolation_mailbox.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/net/socket_connect.h"

namespace ardma {
namespace {

constexpr absl::Duration kLongestSleep = absl::Milliseconds(100);

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

uint32_t* Word(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }

// Sleeps while *word is `seen`, for at most `timeout` (InfiniteDuration: no limit).
void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, absl::Duration timeout) {
  timespec ts = absl::ToTimespec(timeout);
  ::syscall(SYS_futex, Word(word), FUTEX_WAIT, seen,
            timeout == absl::InfiniteDuration() ? nullptr : &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, Word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

// The shared page: each word on a cache line of its own, then the buffer.
struct Mailbox::Shared {
  // Whose turn it is: even, the server's; odd, the worker's. Only ever incremented (by one when a
  // side passes the turn, by two when the watcher wakes a waiter), so it never loses a pass.
  alignas(64) std::atomic<uint32_t> turn{0};
  alignas(64) std::atomic<uint32_t> sleeping[2] = {0, 0};  // a side is (about to be) in FUTEX_WAIT
  alignas(64) std::atomic<uint32_t> dead{0};                // the worker died (the watcher)
  alignas(64) std::atomic<uint64_t> length{0};
  std::atomic<uint32_t> type{0};
  std::atomic<uint32_t> spilled{0};  // the payload follows on the socket
  alignas(64) char buffer[kCapacity];
};

absl::StatusOr<int> Mailbox::CreateFile() {
  int fd = ::memfd_create("ardmad-mailbox", MFD_CLOEXEC);
  if (fd < 0) return absl::ResourceExhaustedError(absl::StrCat("memfd: ", std::strerror(errno)));
  if (::ftruncate(fd, sizeof(Shared)) != 0) {
    int e = errno;
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("sizing a mailbox: ", std::strerror(e)));
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<Mailbox>> Mailbox::Map(int fd, Side side) {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("mapping a mailbox: ", std::strerror(errno)));
  }
  // A new file is zeros, which is how a fresh Shared starts; the server makes it one.
  Shared* shared = side == kServer ? new (p) Shared : static_cast<Shared*>(p);
  return std::unique_ptr<Mailbox>(new Mailbox(shared, side));
}

Mailbox::~Mailbox() { ::munmap(shared_, sizeof(Shared)); }

bool Mailbox::Send(Type type, std::string_view payload, int socket) {
  const bool spill = payload.size() > kCapacity;
  shared_->length.store(payload.size(), std::memory_order_relaxed);
  shared_->type.store(type, std::memory_order_relaxed);
  shared_->spilled.store(spill ? 1 : 0, std::memory_order_relaxed);
  if (!spill) std::memcpy(shared_->buffer, payload.data(), payload.size());
  shared_->turn.fetch_add(1, std::memory_order_seq_cst);
  if (shared_->sleeping[side_ ^ 1].load(std::memory_order_seq_cst) != 0) {
    FutexWakeAll(&shared_->turn);
  }
  return !spill || SendAll(socket, payload).ok();
}

Mailbox::Wait Mailbox::Await(absl::Time until, absl::Duration spin, absl::Duration yield) {
  if (Mine(shared_->turn.load(std::memory_order_acquire))) return Wait::kTurn;
  if (spin > absl::ZeroDuration()) {
    const absl::Time stop = std::min(until, absl::Now() + spin);
    do {
      for (int i = 0; i < 64; ++i) {
        CpuRelax();
        if (Mine(shared_->turn.load(std::memory_order_acquire))) return Wait::kTurn;
      }
    } while (absl::Now() < stop);
  }
  if (yield > absl::ZeroDuration()) {
    // The peer runs on this CPU: give it the CPU without sleeping, so it need not wake us.
    const absl::Time stop = std::min(until, absl::Now() + yield);
    do {
      ::sched_yield();
      if (Mine(shared_->turn.load(std::memory_order_acquire))) return Wait::kTurn;
    } while (absl::Now() < stop);
  }
  for (;;) {
    if (shared_->dead.load(std::memory_order_acquire) != 0) return Wait::kPeerDied;
    absl::Time now = absl::Now();
    if (now >= until) return Wait::kTimeout;
    // Say so, then look once more: either the peer sees the flag and wakes us, or we see its turn
    // (both sequentially consistent).
    shared_->sleeping[side_].store(1, std::memory_order_seq_cst);
    uint32_t seen = shared_->turn.load(std::memory_order_seq_cst);
    if (!Mine(seen) && shared_->dead.load(std::memory_order_seq_cst) == 0) {
      // (The server wakes now and then to look at its deadline and at shutdown.)
      FutexWait(&shared_->turn, seen,
                until == absl::InfiniteFuture() ? absl::InfiniteDuration()
                                                : std::min(until - now, kLongestSleep));
    }
    shared_->sleeping[side_].store(0, std::memory_order_relaxed);
    if (Mine(shared_->turn.load(std::memory_order_acquire))) return Wait::kTurn;
  }
}

bool Mailbox::Receive(Type* type, std::string* payload, int socket) {
  // Each field once: the peer may be rewriting them.
  const uint64_t length = shared_->length.load(std::memory_order_relaxed);
  const uint32_t t = shared_->type.load(std::memory_order_relaxed);
  const bool spilled = shared_->spilled.load(std::memory_order_relaxed) != 0;
  if (t > UINT8_MAX || length > (spilled ? kMaxPayload : kCapacity)) return false;
  *type = static_cast<Type>(t);
  payload->resize(length);
  if (spilled) return RecvExactly(socket, payload->data(), length).ok();
  std::memcpy(payload->data(), shared_->buffer, length);
  return true;
}

void Mailbox::PeerDied() {
  shared_->dead.store(1, std::memory_order_seq_cst);
  shared_->turn.fetch_add(2, std::memory_order_seq_cst);  // a waiter's FUTEX_WAIT sees a change
  FutexWakeAll(&shared_->turn);
}

// ---- DeathWatch ----

absl::StatusOr<std::unique_ptr<DeathWatch>> DeathWatch::Start() {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  int wake = ::eventfd(0, EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // the wake-up
  if (ep < 0 || wake < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev) != 0) {
    std::string why = std::strerror(errno);
    if (ep >= 0) ::close(ep);
    if (wake >= 0) ::close(wake);
    return absl::ResourceExhaustedError(absl::StrCat("starting the worker watch: ", why));
  }
  std::unique_ptr<DeathWatch> watch(new DeathWatch(ep, wake));
  watch->thread_ = std::thread([w = watch.get()] { w->Loop(); });
  return watch;
}

DeathWatch::~DeathWatch() {
  uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) != sizeof one) {
    // An eventfd takes a write unless it would overflow: it cannot here.
  }
  thread_.join();
  for (auto& [handle, w] : watched_) ::close(w.pidfd);
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

absl::StatusOr<uint64_t> DeathWatch::Watch(pid_t pid, int socket, Mailbox* mailbox) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    return absl::UnavailableError(absl::StrCat("pidfd_open: ", std::strerror(errno)));
  }
  absl::MutexLock lock(&mu_);
  uint64_t handle = next_++;
  epoll_event ended{}, hung_up{};
  ended.events = EPOLLIN | EPOLLONESHOT;  // a pidfd is readable once its process ended
  ended.data.u64 = handle;
  hung_up.events = EPOLLRDHUP | EPOLLONESHOT;  // (not EPOLLIN: what it says is read elsewhere)
  hung_up.data.u64 = handle;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ended) != 0 ||
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket, &hung_up) != 0) {
    std::string why = std::strerror(errno);
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, pidfd, nullptr);
    ::close(pidfd);
    return absl::ResourceExhaustedError(absl::StrCat("watching a worker: ", why));
  }
  watched_[handle] = {pidfd, socket, mailbox};
  return handle;
}

void DeathWatch::Forget(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  auto it = watched_.find(handle);
  if (it == watched_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.pidfd, nullptr);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.socket, nullptr);
  ::close(it->second.pidfd);
  watched_.erase(it);
}

void DeathWatch::Loop() {
  std::vector<epoll_event> events(16);
  for (;;) {
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    absl::MutexLock lock(&mu_);  // Forget waits for this, so the mailboxes are alive
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == 0) return;  // the destructor
      auto it = watched_.find(events[i].data.u64);
      if (it != watched_.end()) it->second.mailbox->PeerDied();  // (one-shot: not again)
    }
  }
}

}  // namespace ardma
