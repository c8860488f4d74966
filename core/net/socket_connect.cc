#include "core/net/socket_connect.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/host_port.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

constexpr std::string_view kUnixPrefix = "unix:";

absl::StatusOr<int> ConnectUnix(std::string_view path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad unix socket path '", ToAbsl(path), "'"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoUnavailable("socket", errno);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = ErrnoUnavailable(absl::StrCat("connect to unix:", ToAbsl(path)), errno);
    ::close(fd);
    return s;
  }
  return fd;
}

}  // namespace

absl::Status ErrnoUnavailable(const std::string& what, int err) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
}

absl::StatusOr<int> ConnectSocket(std::string_view address, absl::Duration timeout) {
  if (address.substr(0, kUnixPrefix.size()) == kUnixPrefix) {
    return ConnectUnix(address.substr(kUnixPrefix.size()));
  }
  ARDMA_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  std::string port = std::to_string(hp.port);
  int gai = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &results);
  if (gai != 0) {
    // A name that does not exist will not come to exist by retrying: INVALID_ARGUMENT, not
    // UNAVAILABLE (which callers retry).
    std::string message = absl::StrCat("resolve ", hp.host, ": ", ::gai_strerror(gai));
    if (gai == EAI_NONAME || gai == EAI_SERVICE) return absl::InvalidArgumentError(message);
    return absl::UnavailableError(message);
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", hp.host));
  int fd = -1;
  for (addrinfo* ai = results; ai != nullptr && fd < 0; ai = ai->ai_next) {
    int s =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (s < 0) {
      last = ErrnoUnavailable("socket", errno);
      continue;
    }
    int rc = ::connect(s, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
      int polled = ::poll(&p, 1, ms > 0 ? ms : 1);
      if (polled == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        rc = -1;
        if (polled == 0) errno = ETIMEDOUT;  // else poll set errno
      }
    }
    if (rc != 0) {
      last = ErrnoUnavailable(absl::StrCat("connect to ", ToAbsl(address)), errno);
      ::close(s);
      continue;
    }
    fd = s;
  }
  ::freeaddrinfo(results);
  if (fd < 0) return last;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

absl::Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoUnavailable("send", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status RecvExactly(int fd, char* out, size_t n, absl::Time deadline) {
  while (n > 0) {
    if (deadline != absl::InfiniteFuture()) {
      int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (ms <= 0) return absl::DeadlineExceededError("recv: nothing in time");
      pollfd pf{fd, POLLIN, 0};
      int ready = ::poll(&pf, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
      if (ready < 0 && errno != EINTR) return ErrnoUnavailable("poll", errno);
      if (ready <= 0) continue;
    }
    ssize_t got = ::recv(fd, out, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoUnavailable("recv", errno);
    if (got == 0) return absl::UnavailableError("connection closed by the peer");
    out += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace ardma
