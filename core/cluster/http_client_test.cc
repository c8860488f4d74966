#include "core/cluster/http_client.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/testing/scripted_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::cluster {
namespace {

using ::ardma::testing::ScriptedServer;
using ::testing::HasSubstr;

TEST(ChunkDecoderTest, DecodesABodyCutAnywhere) {
  const std::string wire =
      "4\r\nWiki\r\n6;ext=1\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    ChunkDecoder decoder;
    std::string in = wire.substr(0, cut), out;
    absl::StatusOr<bool> first = decoder.Feed(in, &out);
    ASSERT_TRUE(first.ok()) << cut << ": " << first.status();
    in += wire.substr(cut);
    absl::StatusOr<bool> done = decoder.Feed(in, &out);
    ASSERT_TRUE(done.ok()) << cut << ": " << done.status();
    EXPECT_TRUE(*done) << cut;
    EXPECT_EQ(out, "Wikipedia in \r\n\r\nchunks.") << cut;
    EXPECT_EQ(in, "") << cut;
  }
}

TEST(ChunkDecoderTest, RefusesWhatIsNotChunked) {
  for (std::string bad : {std::string("zz\r\nab\r\n"), std::string("2\r\nabXY"),
                          std::string(2000, '1')}) {
    ChunkDecoder decoder;
    std::string out;
    EXPECT_EQ(decoder.Feed(bad, &out).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

// Reads one request (head and Content-Length body) from `fd`: its body, or "" at the end.
std::string ReadRequest(int fd) {
  std::string in;
  char buf[4096];
  size_t head_end;
  while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    in.append(buf, n);
  }
  size_t at = in.find("Content-Length: ");
  size_t length = at == std::string::npos ? 0 : std::stoul(in.substr(at + 16));
  while (in.size() < head_end + 4 + length) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    in.append(buf, n);
  }
  return in.substr(head_end + 4, length);
}

void Send(int fd, std::string_view bytes) { (void)!::send(fd, bytes.data(), bytes.size(), 0); }

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

TEST(HttpConnectionTest, KeepsTheConnectionAndReadsLengthChunkedAndToTheEndBodies) {
  ScriptedServer server([](int fd, int) {
    EXPECT_EQ(ReadRequest(fd), "{\"a\":1}");
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    EXPECT_EQ(ReadRequest(fd), "two");
    // A chunked answer sent a few bytes at a time.
    std::string chunked = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "3\r\nwor\r\n2\r\nld\r\n0\r\n\r\n";
    for (size_t i = 0; i < chunked.size(); i += 7) Send(fd, chunked.substr(i, 7));
    EXPECT_EQ(ReadRequest(fd), "three");
    Send(fd, "HTTP/1.0 200 OK\r\n\r\nuntil the end");
  });
  HttpConnection http(server.endpoint());
  absl::StatusOr<HttpAnswer> one = http.Post("/v3/kv/range", "{\"a\":1}", Soon());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(one->body, "hello");
  absl::StatusOr<HttpAnswer> two = http.Post("/x", "two", Soon());
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->status, 404);
  EXPECT_EQ(two->body, "world");
  absl::StatusOr<HttpAnswer> three = http.Post("/x", "three", Soon());
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->body, "until the end");
  EXPECT_EQ(server.accepted(), 1);  // one connection for all three
}

TEST(HttpConnectionTest, AKeptConnectionTheServerClosedIsReplacedOnce) {
  ScriptedServer server([](int fd, int n) {
    EXPECT_EQ(ReadRequest(fd), absl::StrCat("call ", n));
    Send(fd, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", n));
    // Closed without saying so (an idle timeout on the server's side).
  });
  HttpConnection http(server.endpoint());
  ASSERT_EQ(http.Post("/x", "call 0", Soon())->body, "0");
  absl::StatusOr<HttpAnswer> again = http.Post("/x", "call 1", Soon());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->body, "1");
  EXPECT_EQ(server.accepted(), 2);
}

TEST(HttpConnectionTest, NothingListeningSilenceAndNonsenseAreTheirOwnErrors) {
  HttpConnection nobody("127.0.0.1:1");
  EXPECT_EQ(nobody.Post("/x", "", Soon()).status().code(), absl::StatusCode::kUnavailable);

  absl::Notification release;
  ScriptedServer silent([&](int fd, int) {
    ReadRequest(fd);
    release.WaitForNotification();
  });
  HttpConnection quiet(silent.endpoint());
  absl::Time start = absl::Now();
  absl::StatusOr<HttpAnswer> late = quiet.Post("/x", "", absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  release.Notify();

  ScriptedServer binary([](int fd, int) {
    ReadRequest(fd);
    Send(fd, std::string("RDM1\x01\x02\x03\x00", 8));
  });
  HttpConnection garbage(binary.endpoint());
  absl::StatusOr<HttpAnswer> bad = garbage.Post("/x", "", Soon());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("does not answer in HTTP/1.1"));
}

TEST(HttpConnectionTest, AStreamIsReadAsItComesAndCanBeWoken) {
  absl::Notification second, end;
  ScriptedServer server([&](int fd, int) {
    EXPECT_EQ(ReadRequest(fd), "watch");
    Send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n");
    second.WaitForNotification();
    Send(fd, "7\r\nsecond\n\r\n");
    end.WaitForNotification();
    Send(fd, "0\r\n\r\n");
  });
  HttpConnection http(server.endpoint());
  absl::StatusOr<int> status = http.StartStream("/v3/watch", "watch", Soon());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 200);
  std::string got;
  while (got.empty()) ASSERT_TRUE(*http.ReadStream(&got, Soon()));
  EXPECT_EQ(got, "first\n");

  // Nothing more comes: a short deadline passes, the stream stays open.
  absl::StatusOr<bool> idle = http.ReadStream(&got, absl::Now() + absl::Milliseconds(50));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_TRUE(*idle);
  EXPECT_EQ(got, "first\n");

  // A wake-up ends the wait long before the deadline.
  int wake[2];
  ASSERT_EQ(::pipe2(wake, O_CLOEXEC), 0);
  std::thread waker([&] { (void)!::write(wake[1], "x", 1); });
  absl::Time start = absl::Now();
  ASSERT_TRUE(*http.ReadStream(&got, absl::Now() + absl::Seconds(30), wake[0]));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  waker.join();
  ::close(wake[0]);
  ::close(wake[1]);

  second.Notify();
  while (got == "first\n") ASSERT_TRUE(*http.ReadStream(&got, Soon()));
  EXPECT_EQ(got, "first\nsecond\n");
  end.Notify();
  absl::StatusOr<bool> open = true;
  while (open.ok() && *open) open = http.ReadStream(&got, Soon());
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(got, "first\nsecond\n");
}

}  // namespace
}  // namespace ardma::cluster
