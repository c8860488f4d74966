// KeepAlive: a thread that keeps one transport from being closed as idle by a server with
// --idle-timeout, sending a PING (Transport::KeepAlive) every third of the timeout the server
// announced in its HELLO. Only a client that has stopped or gone is idle then, which is what the
// timeout is for: the connection's lock words, lock tickets and parked requests pass on only
// when their owner can no longer use them (docs/PROTOCOL.md, "Idle connections").
//
// Owned by the Client next to the transport; destroy it (it joins its thread) before the last
// owning reference to the transport goes, so the transport is never torn down on this thread.
//
//   auto keepalive = std::make_unique<KeepAlive>(transport, transport->idle_timeout() / 3);
#ifndef ARDMA_CORE_CLIENT_KEEP_ALIVE_H_
#define ARDMA_CORE_CLIENT_KEEP_ALIVE_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/client/transport.h"

namespace ardma {

class KeepAlive {
 public:
  KeepAlive(std::weak_ptr<Transport> transport, absl::Duration every);
  ~KeepAlive();
  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

 private:
  void Run();

  const std::weak_ptr<Transport> transport_;
  const absl::Duration every_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_KEEP_ALIVE_H_
