// Splitting bytes into frames: the one place that does it, for every reader of the protocol —
// the server's sessions, the client's connections, the benchmarks' load generator (streams, with
// FrameReader) and the UCX transport (one frame per message, with ParseWholeFrame).
//
//   FrameReader reader(limits);
//   size_t n = recv(fd, reader.space(), reader.space_size(), 0);
//   reader.Commit(n);
//   for (;;) {
//     ARDMA_ASSIGN_OR_RETURN(std::optional<Frame> frame, reader.Next());
//     if (!frame) break;  // the rest is part of a frame: read more
//     Handle(frame->header, frame->payload);
//   }
//
// Memory follows the bytes that actually arrived, never a header's claimed length: a frame
// larger than the buffer grows it (doubling, never past the frame), and a buffer grown for one
// large frame is given back by Shrink() once it is empty.
#ifndef ARDMA_CORE_WIRE_FRAME_READER_H_
#define ARDMA_CORE_WIRE_FRAME_READER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/wire/frame.h"

namespace ardma::wire {

// A frame: its header and a view of its payload (in the reader's buffer, or the message given).
struct Frame {
  FrameHeader header;
  std::string_view payload;
};

// `bytes` as exactly one frame (a UCX active message carries one); an error if the header is
// refused or the length does not match it.
absl::StatusOr<Frame> ParseWholeFrame(std::string_view bytes, const WireLimits& limits);

// One frame read from a blocking stream, for the exchanges that read one frame at a time (the
// handshake, tests that speak the protocol by hand). `recv_exactly(out, n)` fills exactly n bytes
// or fails.
struct OwnedFrame {
  FrameHeader header;
  std::string payload;
};
absl::StatusOr<OwnedFrame> ReadFrame(absl::FunctionRef<absl::Status(char*, size_t)> recv_exactly,
                                     const WireLimits& limits);

class FrameReader {
 public:
  static constexpr size_t kInitialCapacity = 64 << 10;

  explicit FrameReader(const WireLimits& limits, size_t initial_capacity = kInitialCapacity);

  // Where the next read puts its bytes; never empty. Calling it invalidates the frames Next()
  // returned (the buffer may move).
  char* space();
  size_t space_size();
  // `n` bytes arrived at space().
  void Commit(size_t n) { end_ += n; }

  // The next whole frame, valid until the next space(); nullopt while the buffer holds only part
  // of one. An error for a header the limits refuse: the stream cannot be read further, and
  // unread() starts with that header.
  absl::StatusOr<std::optional<Frame>> Next();

  // The bytes not taken yet.
  std::string_view unread() const { return std::string_view(buf_.get() + begin_, end_ - begin_); }
  bool empty() const { return begin_ == end_; }
  // Gives back a buffer grown for one large frame, if nothing is left in it.
  void Shrink();

 private:
  const WireLimits limits_;
  const size_t initial_capacity_;
  // Left uninitialised: a buffer grown for a large frame is written only as its bytes arrive.
  void Reallocate(size_t capacity);

  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  size_t begin_ = 0, end_ = 0;
  size_t wanted_ = 0;  // the size of the incomplete frame at begin_, once its header arrived
};

}  // namespace ardma::wire

#endif  // ARDMA_CORE_WIRE_FRAME_READER_H_
