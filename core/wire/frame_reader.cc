#include "core/wire/frame_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace ardma::wire {
namespace {

// Below this much room after the buffered bytes, a read first moves them to the front.
constexpr size_t kMinSpace = 4096;

}  // namespace

absl::StatusOr<Frame> ParseWholeFrame(std::string_view bytes, const WireLimits& limits) {
  ARDMA_ASSIGN_OR_RETURN(FrameHeader header, DecodeHeader(bytes, limits));
  if (bytes.size() != kHeaderSize + header.payload_len) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", bytes.size(),
                                                   " bytes holds a frame of ",
                                                   kHeaderSize + header.payload_len));
  }
  return Frame{header, bytes.substr(kHeaderSize)};
}

absl::StatusOr<OwnedFrame> ReadFrame(absl::FunctionRef<absl::Status(char*, size_t)> recv_exactly,
                                     const WireLimits& limits) {
  char head[kHeaderSize];
  ARDMA_RETURN_IF_ERROR(recv_exactly(head, sizeof head));
  OwnedFrame frame;
  ARDMA_ASSIGN_OR_RETURN(frame.header, DecodeHeader(std::string_view(head, sizeof head), limits));
  frame.payload.resize(frame.header.payload_len);
  ARDMA_RETURN_IF_ERROR(recv_exactly(frame.payload.data(), frame.payload.size()));
  return frame;
}

FrameReader::FrameReader(const WireLimits& limits, size_t initial_capacity)
    : limits_(limits), initial_capacity_(initial_capacity) {
  Reallocate(initial_capacity);
}

void FrameReader::Reallocate(size_t capacity) {
  std::unique_ptr<char[]> fresh(new char[capacity]);  // (not value-initialised: no zero fill)
  if (end_ > begin_) std::memcpy(fresh.get(), buf_.get() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  buf_ = std::move(fresh);
  capacity_ = capacity;
}

char* FrameReader::space() {
  if (begin_ == end_) begin_ = end_ = 0;
  if (capacity_ - end_ < kMinSpace && begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {
    // Full of one incomplete frame: straight to the frame's size once its header came (the limits
    // bound it, and the pages are touched only as its bytes arrive), else double.
    Reallocate(wanted_ > capacity_ ? wanted_ : 2 * capacity_);
  }
  return buf_.get() + end_;
}

size_t FrameReader::space_size() {
  space();
  return capacity_ - end_;
}

absl::StatusOr<std::optional<Frame>> FrameReader::Next() {
  wanted_ = 0;
  if (end_ - begin_ < kHeaderSize) return std::nullopt;
  ARDMA_ASSIGN_OR_RETURN(
      FrameHeader header,
      DecodeHeader(std::string_view(buf_.get() + begin_, kHeaderSize), limits_));
  size_t size = kHeaderSize + header.payload_len;
  if (end_ - begin_ < size) {
    wanted_ = size;
    return std::nullopt;
  }
  Frame frame{header, std::string_view(buf_.get() + begin_ + kHeaderSize, header.payload_len)};
  begin_ += size;
  return frame;
}

void FrameReader::Shrink() {
  if (begin_ != end_ || capacity_ <= 4 * initial_capacity_) return;
  begin_ = end_ = 0;
  Reallocate(initial_capacity_);
}

}  // namespace ardma::wire
