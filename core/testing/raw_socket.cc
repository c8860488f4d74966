#include "core/testing/raw_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ardma::testing {

RawSocket::RawSocket(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  fd_ = fd;
  // Every connection opens with the server's HELLO.
  std::optional<RawResponse> hello = Receive();
  if (!hello.has_value() || hello->header.op != wire::Op::kHello) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  hello_ = std::move(hello->payload);
}

RawSocket::~RawSocket() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawSocket::SendBytes(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawSocket::SendFrame(wire::Op op, std::string_view payload, uint64_t request_id,
                          uint64_t client_id) {
  std::string frame;
  size_t start = wire::BeginFrame(&frame);
  frame.append(payload);
  wire::FinishFrame({.op = op, .request_id = request_id, .client_id = client_id}, start, &frame);
  return SendBytes(frame);
}

bool RecvExactly(int fd, char* out, size_t n) {
  while (n > 0) {
    ssize_t got = ::recv(fd, out, n, 0);
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

std::optional<RawResponse> RawSocket::Receive() {
  char header[wire::kHeaderSize];
  if (!RecvExactly(fd_, header, sizeof(header))) return std::nullopt;
  absl::StatusOr<wire::FrameHeader> h =
      wire::DecodeHeader(std::string_view(header, sizeof(header)), wire::WireLimits{});
  if (!h.ok()) return std::nullopt;
  RawResponse r{*h, std::string(h->payload_len, '\0')};
  if (!RecvExactly(fd_, r.payload.data(), r.payload.size())) return std::nullopt;
  return r;
}

bool RawSocket::WaitClosed() {
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

bool RawSocket::ClosedNow() {
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

}  // namespace ardma::testing
