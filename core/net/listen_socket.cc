#include "core/net/listen_socket.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/host_port.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma {

absl::StatusOr<ListeningSocket> ListenSocket(std::string_view address) {
  ARDMA_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* results = nullptr;
  std::string port = std::to_string(hp.port);
  int gai =
      ::getaddrinfo(hp.host.empty() ? nullptr : hp.host.c_str(), port.c_str(), &hints, &results);
  if (gai != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", hp.host, ": ", ::gai_strerror(gai)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", hp.host));
  ListeningSocket out;
  for (addrinfo* ai = results; ai != nullptr && out.fd < 0; ai = ai->ai_next) {
    int s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (s < 0) {
      last = ErrnoUnavailable("socket", errno);
      continue;
    }
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (::bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s, SOMAXCONN) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      last = ErrnoUnavailable(absl::StrCat("cannot listen on ", ToAbsl(address)), errno);
      ::close(s);
      continue;
    }
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV);
    out.fd = s;
    out.address = bound.ss_family == AF_INET6 ? absl::StrCat("[", host, "]:", serv)
                                              : absl::StrCat(host, ":", serv);
  }
  ::freeaddrinfo(results);
  if (out.fd < 0) return last;
  return out;
}

absl::StatusOr<ListeningSocket> ListenUnixSocket(const std::string& path, mode_t mode) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad unix socket path '", path, "'"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    absl::StatusOr<int> probe = ConnectSocket(absl::StrCat("unix:", path), absl::Seconds(1));
    if (probe.ok()) {
      ::close(*probe);
      return absl::UnavailableError(absl::StrCat("unix socket ", path, " is in use"));
    }
    ::unlink(path.c_str());
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoUnavailable("socket", errno);
  // The socket file is created with `mode` (through the umask, so it never exists with a wider
  // one), then given exactly that mode.
  mode_t old_umask = ::umask(0777 & ~mode);
  int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int bind_errno = errno;
  ::umask(old_umask);
  errno = bind_errno;
  if (bound != 0 || ::chmod(path.c_str(), mode) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    absl::Status s = ErrnoUnavailable(absl::StrCat("cannot listen on unix socket ", path), errno);
    ::close(fd);
    return s;
  }
  return ListeningSocket{fd, path};
}

}  // namespace ardma
