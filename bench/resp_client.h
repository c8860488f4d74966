// RespClient: a minimal blocking Redis (RESP2) client, enough for the benchmarks' Redis peers
// (commands in, simple strings / errors / integers / bulk strings out). Not for production use.
#ifndef ARDMA_BENCH_RESP_CLIENT_H_
#define ARDMA_BENCH_RESP_CLIENT_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ardma::bench {

struct RespReply {
  enum class Type { kStatus, kInteger, kBulk, kNil } type = Type::kNil;
  std::string text;     // status or bulk string
  int64_t integer = 0;  // integer replies
};

class RespClient {
 public:
  // "host:port"; UNAVAILABLE if nothing listens.
  static absl::StatusOr<std::unique_ptr<RespClient>> Connect(std::string_view address);
  ~RespClient();
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;

  // Sends one command and reads its reply; a Redis error reply is FAILED_PRECONDITION.
  absl::StatusOr<RespReply> Command(std::initializer_list<std::string_view> args);

 private:
  explicit RespClient(int fd) : fd_(fd) {}
  absl::StatusOr<std::string> ReadLine();
  absl::Status Fill();

  int fd_;
  std::string in_;
  size_t pos_ = 0;
};

}  // namespace ardma::bench

#endif  // ARDMA_BENCH_RESP_CLIENT_H_
