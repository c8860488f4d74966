// Listening sockets: the one place that binds a server address, for ardmad's TCP and Unix-domain
// listeners (handed to Asio's acceptors) and for the small blocking servers (the load monitor's
// socket daemon and exporter). Plain functions; any thread.
//
//   ARDMA_ASSIGN_OR_RETURN(ListeningSocket s, ListenSocket("127.0.0.1:0"));
//   // s.address is "127.0.0.1:43127"; accept(s.fd, ...) and close it when done.
#ifndef ARDMA_CORE_NET_LISTEN_SOCKET_H_
#define ARDMA_CORE_NET_LISTEN_SOCKET_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ardma {

// A listening socket the caller owns (close-on-exec, blocking) and the address actually bound.
struct ListeningSocket {
  int fd = -1;
  std::string address;  // "host:port" ("[v6]:port") for TCP; the path for a Unix-domain socket
};

// Binds "host:port" (port 0 picks a free port) with SO_REUSEADDR and listens. UNAVAILABLE
// "cannot listen on ADDRESS: ..." if it cannot; INVALID_ARGUMENT for a malformed address.
absl::StatusOr<ListeningSocket> ListenSocket(std::string_view address);

// Binds a Unix-domain socket at `path`. A socket file left by a server that died is replaced; one
// that still answers is in use (UNAVAILABLE "unix socket PATH is in use"). The socket file gets
// `mode` (0600: only the server's user may connect).
absl::StatusOr<ListeningSocket> ListenUnixSocket(const std::string& path, mode_t mode = 0600);

}  // namespace ardma

#endif  // ARDMA_CORE_NET_LISTEN_SOCKET_H_
