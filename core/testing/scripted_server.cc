#include "core/testing/scripted_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ardma::testing {

ScriptedServer::ScriptedServer(std::function<void(int fd, int n)> serve)
    : serve_(std::move(serve)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd_, 8) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;  // endpoint() stays empty: the test's connection fails
  }
  endpoint_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  thread_ = std::thread([this] {
    for (int n = 0;; ++n) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      accepted_ = n + 1;
      serve_(c, n);
      ::close(c);
    }
  });
}

ScriptedServer::~ScriptedServer() {
  ::shutdown(fd_, SHUT_RDWR);  // ends accept()
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ardma::testing
