#include "core/wire/frame_reader.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ardma::wire {
namespace {

std::string MakeFrame(uint64_t request_id, std::string_view payload) {
  std::string out;
  size_t start = BeginFrame(&out);
  out.append(payload);
  FinishFrame({.op = Op::kPing, .request_id = request_id}, start, &out);
  return out;
}

// Feeds `bytes` in pieces of `piece` bytes; returns the payloads of the frames that came out.
std::vector<std::string> Feed(FrameReader& reader, std::string_view bytes, size_t piece) {
  std::vector<std::string> out;
  while (!bytes.empty()) {
    size_t n = std::min({piece, bytes.size(), reader.space_size()});
    std::memcpy(reader.space(), bytes.data(), n);
    reader.Commit(n);
    bytes.remove_prefix(n);
    for (;;) {
      absl::StatusOr<std::optional<Frame>> frame = reader.Next();
      EXPECT_TRUE(frame.ok()) << frame.status();
      if (!frame.ok() || !frame->has_value()) break;
      out.emplace_back((*frame)->payload);
    }
  }
  return out;
}

TEST(FrameReaderTest, FramesSplitAnywhereComeOutWholeAndInOrder) {
  std::string stream;
  std::vector<std::string> payloads = {"", "a", std::string(5000, 'b'), std::string(70000, 'c'),
                                       "d"};
  for (size_t i = 0; i < payloads.size(); ++i) stream += MakeFrame(i, payloads[i]);
  for (size_t piece : {1, 7, 31, 32, 33, 4096, 100000}) {
    FrameReader reader(WireLimits{}, /*initial_capacity=*/1024);
    EXPECT_EQ(Feed(reader, stream, piece), payloads) << "pieces of " << piece;
    EXPECT_TRUE(reader.empty());
  }
}

TEST(FrameReaderTest, ABufferGrowsToTheFrameNotToItsClaimAndShrinksAfter) {
  FrameReader reader(WireLimits{}, /*initial_capacity=*/1024);
  std::string big = MakeFrame(1, std::string(10000, 'x'));
  // Only the header and a little: the buffer does not grow for what has not arrived.
  std::memcpy(reader.space(), big.data(), 100);
  reader.Commit(100);
  ASSERT_FALSE(reader.Next()->has_value());
  EXPECT_LE(reader.space_size() + 100, 1024u);
  // The rest: the buffer grows, never past the frame's size.
  EXPECT_EQ(Feed(reader, std::string_view(big).substr(100), 1000).size(), 1u);
  EXPECT_LE(reader.space_size(), big.size());
  // Empty again: a buffer over four times the initial one is given back.
  std::string huge = MakeFrame(2, std::string(8000, 'y'));
  Feed(reader, huge, 100000);
  reader.Shrink();
  EXPECT_EQ(reader.space_size(), 1024u);
}

TEST(FrameReaderTest, ARefusedHeaderIsAnErrorAndStaysAtTheFront) {
  FrameReader reader(WireLimits{.max_payload_bytes = 16}, 1024);
  std::string frame = MakeFrame(9, std::string(17, 'z'));
  std::memcpy(reader.space(), frame.data(), frame.size());
  reader.Commit(frame.size());
  absl::StatusOr<std::optional<Frame>> next = reader.Next();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reader.unread().substr(0, kHeaderSize), std::string_view(frame).substr(0, kHeaderSize));
}

TEST(FrameReaderTest, AWholeFrameMustFillItsMessageExactly) {
  std::string frame = MakeFrame(3, "payload");
  absl::StatusOr<Frame> parsed = ParseWholeFrame(frame, WireLimits{});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->header.request_id, 3u);
  EXPECT_EQ(parsed->payload, "payload");
  EXPECT_FALSE(ParseWholeFrame(frame + "x", WireLimits{}).ok());
  EXPECT_FALSE(ParseWholeFrame(frame.substr(0, frame.size() - 1), WireLimits{}).ok());
  EXPECT_FALSE(ParseWholeFrame(frame.substr(0, 5), WireLimits{}).ok());
}

TEST(FrameReaderTest, ReadFrameTakesOneFrameFromABlockingStream) {
  std::string stream = MakeFrame(4, "one") + MakeFrame(5, "two");
  size_t at = 0;
  auto recv = [&](char* out, size_t n) {
    if (stream.size() - at < n) return absl::UnavailableError("end of stream");
    std::memcpy(out, stream.data() + at, n);
    at += n;
    return absl::OkStatus();
  };
  absl::StatusOr<OwnedFrame> first = ReadFrame(recv, WireLimits{});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->payload, "one");
  absl::StatusOr<OwnedFrame> second = ReadFrame(recv, WireLimits{});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->header.request_id, 5u);
  EXPECT_EQ(ReadFrame(recv, WireLimits{}).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ardma::wire
