// ConnectSocket: the one place that turns an ardmad address into a connected socket, for the
// Client's connections and for tools (the load generator) that run their own event loop; and the
// blocking helpers of small plain-TCP servers and clients (the delay proxy, the load monitor's
// socket daemon). The listening side is listen_socket.h. Plain functions; any thread.
#ifndef ARDMA_CORE_NET_SOCKET_CONNECT_H_
#define ARDMA_CORE_NET_SOCKET_CONNECT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma {

// Connects to "host:port" (TCP, trying each resolved address, each within `timeout`; TCP_NODELAY
// set) or "unix:/path" (a Unix-domain socket). Returns a blocking, close-on-exec descriptor the
// caller owns. UNAVAILABLE if the server cannot be reached; INVALID_ARGUMENT for a malformed
// address.
absl::StatusOr<int> ConnectSocket(std::string_view address, absl::Duration timeout);

// UNAVAILABLE "<what>: <strerror(err)>", for socket calls that failed with errno `err`.
absl::Status ErrnoUnavailable(const std::string& what, int err);

// Blocking, whole-buffer I/O; UNAVAILABLE on an error or, for RecvExactly, an early end of stream;
// DEADLINE_EXCEEDED if `deadline` passes before the n bytes have come.
absl::Status SendAll(int fd, std::string_view data);
absl::Status RecvExactly(int fd, char* out, size_t n, absl::Time deadline = absl::InfiniteFuture());

}  // namespace ardma

#endif  // ARDMA_CORE_NET_SOCKET_CONNECT_H_
