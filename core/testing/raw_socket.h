// RawSocket: a blocking TCP connection for tests that must speak (or mangle) the wire protocol
// directly, below the Client: garbage bytes, hand-made frames, fixed client and request ids.
#ifndef ARDMA_CORE_TESTING_RAW_SOCKET_H_
#define ARDMA_CORE_TESTING_RAW_SOCKET_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/frame.h"

namespace ardma::testing {

struct RawResponse {
  wire::FrameHeader header;
  std::string payload;
};

class RawSocket {
 public:
  // Connects to 127.0.0.1:port and reads the server's HELLO; check ok().
  explicit RawSocket(uint16_t port);
  ~RawSocket();
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool ok() const { return fd_ >= 0; }
  bool SendBytes(std::string_view bytes);
  bool SendFrame(wire::Op op, std::string_view payload, uint64_t request_id, uint64_t client_id);
  // The next response, or nullopt if the server closed the connection (or 5 s passed).
  std::optional<RawResponse> Receive();
  // How long Receive waits (5 s unless set).
  void SetReceiveTimeout(int seconds);
  // True if the server closed the connection within 5 s.
  bool WaitClosed();
  // True if the server has closed the connection (what it sent before is read and dropped).
  bool ClosedNow();
  // The payload of the server's HELLO.
  const std::string& hello() const { return hello_; }

 private:
  int fd_ = -1;
  std::string hello_;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_RAW_SOCKET_H_
