#include "core/testing/raw_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/net/socket_connect.h"
#include "core/wire/frame_reader.h"

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
  fd_ = fd;
  SetReceiveTimeout(5);
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

bool RawSocket::SendBytes(std::string_view bytes) { return SendAll(fd_, bytes).ok(); }

bool RawSocket::SendFrame(wire::Op op, std::string_view payload, uint64_t request_id,
                          uint64_t client_id) {
  std::string frame;
  size_t start = wire::BeginFrame(&frame);
  frame.append(payload);
  wire::FinishFrame({.op = op, .request_id = request_id, .client_id = client_id}, start, &frame);
  return SendBytes(frame);
}

void RawSocket::SetReceiveTimeout(int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

std::optional<RawResponse> RawSocket::Receive() {
  absl::StatusOr<wire::OwnedFrame> frame = wire::ReadFrame(
      [this](char* out, size_t n) { return RecvExactly(fd_, out, n); }, wire::WireLimits{});
  if (!frame.ok()) return std::nullopt;
  return RawResponse{frame->header, std::move(frame->payload)};
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
