// ConnectSocket: the one place that turns an ardmad address into a connected socket, for the
// Client's connections and for tools (the load generator) that run their own event loop.
#ifndef ARDMA_CORE_CLIENT_SOCKET_CONNECT_H_
#define ARDMA_CORE_CLIENT_SOCKET_CONNECT_H_

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

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_SOCKET_CONNECT_H_
