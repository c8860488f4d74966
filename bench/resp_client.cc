#include "bench/resp_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma::bench {

absl::StatusOr<std::unique_ptr<RespClient>> RespClient::Connect(std::string_view address) {
  ARDMA_ASSIGN_OR_RETURN(int fd, ConnectSocket(address, absl::Seconds(5)));
  return std::unique_ptr<RespClient>(new RespClient(fd));
}

RespClient::~RespClient() { ::close(fd_); }

absl::Status RespClient::Fill() {
  if (pos_ > 0) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      return absl::OkStatus();
    }
    if (n == 0) return absl::UnavailableError("redis closed the connection");
    if (errno != EINTR) return ErrnoUnavailable("recv from redis", errno);
  }
}

absl::StatusOr<std::string> RespClient::ReadLine() {
  for (;;) {
    size_t end = in_.find("\r\n", pos_);
    if (end != std::string::npos) {
      std::string line = in_.substr(pos_, end - pos_);
      pos_ = end + 2;
      return line;
    }
    ARDMA_RETURN_IF_ERROR(Fill());
  }
}

absl::StatusOr<RespReply> RespClient::Command(std::initializer_list<std::string_view> args) {
  std::string out = absl::StrCat("*", args.size(), "\r\n");
  for (std::string_view a : args) {
    absl::StrAppend(&out, "$", a.size(), "\r\n", ToAbsl(a), "\r\n");
  }
  for (size_t sent = 0; sent < out.size();) {
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoUnavailable("send to redis", errno);
    sent += static_cast<size_t>(n);
  }
  absl::StatusOr<std::string> read = ReadLine();
  if (!read.ok()) return read.status();
  const std::string& line = *read;
  if (line.empty()) return absl::DataLossError("empty reply from redis");
  RespReply reply;
  std::string_view body = std::string_view(line).substr(1);
  switch (line[0]) {
    case '+':
      reply.type = RespReply::Type::kStatus;
      reply.text = std::string(body);
      return reply;
    case '-':
      return absl::FailedPreconditionError(absl::StrCat("redis: ", ToAbsl(body)));
    case ':':
      reply.type = RespReply::Type::kInteger;
      if (!absl::SimpleAtoi(ToAbsl(body), &reply.integer)) break;
      return reply;
    case '$': {
      int64_t len;
      if (!absl::SimpleAtoi(ToAbsl(body), &len)) break;
      if (len < 0) return reply;  // nil
      while (in_.size() - pos_ < static_cast<size_t>(len) + 2) ARDMA_RETURN_IF_ERROR(Fill());
      reply.type = RespReply::Type::kBulk;
      reply.text = in_.substr(pos_, static_cast<size_t>(len));
      pos_ += static_cast<size_t>(len) + 2;
      return reply;
    }
    default:
      break;
  }
  return absl::DataLossError(absl::StrCat("unexpected reply from redis: ", line));
}

}  // namespace ardma::bench
