// HttpConnection: the HTTP/1.1 that etcd's JSON gateway needs and nothing more — a POST with a
// body to one HOST:PORT over plain TCP, kept alive between calls; answers whose body has a
// Content-Length, is chunked, or runs to the connection's end; and a streamed answer (a watch),
// read as its chunks come. Written here rather than taken from libcurl, whose 30-odd shared
// libraries cost every tool ~13 ms of start-up (docs/BENCHMARKS.md, issue 34).
//
//   HttpConnection etcd("127.0.0.1:2379");
//   ARDMA_ASSIGN_OR_RETURN(HttpAnswer a, etcd.Post("/v3/kv/range", body, absl::Now() + 2s));
//
// Errors: UNAVAILABLE when nothing answers at the endpoint (refused, unreachable, closed before
// answering) — a caller may try another endpoint; DEADLINE_EXCEEDED when the answer does not come
// in time; DATA_LOSS when what answers does not speak HTTP/1.1. One thread at a time.
#ifndef ARDMA_CORE_CLUSTER_HTTP_CLIENT_H_
#define ARDMA_CORE_CLUSTER_HTTP_CLIENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma::cluster {

struct HttpAnswer {
  int status = 0;  // 200, 404, ...
  std::string body;
};

// The body of a chunked answer, decoded as its bytes arrive in any pieces.
class ChunkDecoder {
 public:
  // Moves the body bytes at the front of `in` to `out` and erases what it consumed (an incomplete
  // size line is left for the next call). True once the last chunk and its trailer are in.
  absl::StatusOr<bool> Feed(std::string& in, std::string* out);

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  State state_ = State::kSize;
  uint64_t left_ = 0;  // bytes of the current chunk still to come
};

class HttpConnection {
 public:
  explicit HttpConnection(std::string endpoint) : endpoint_(std::move(endpoint)) {}
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // POSTs `body` (JSON) to `path` and reads the whole answer. A connection kept from an earlier
  // call that turns out closed by the server (before any byte of the answer) is replaced once.
  absl::StatusOr<HttpAnswer> Post(std::string_view path, std::string_view body,
                                  absl::Time deadline);

  // A streamed POST: sends the request and reads the answer's status line and headers (by
  // `deadline`); its status. Then ReadStream hands over the body as it comes.
  absl::StatusOr<int> StartStream(std::string_view path, std::string_view body,
                                  absl::Time deadline);
  // Appends the body bytes that have come to `out`, waiting until some do, `deadline` passes, or
  // `wake_fd` (if >= 0) becomes readable. False once the body has ended (the stream is over).
  absl::StatusOr<bool> ReadStream(std::string* out, absl::Time deadline, int wake_fd = -1);

  const std::string& endpoint() const { return endpoint_; }
  void Close();

 private:
  struct Head {
    int status = 0;
    bool chunked = false;
    bool close = false;          // the server closes the connection after this answer
    int64_t content_length = -1;  // -1: not given
  };
  absl::Status Send(std::string_view path, std::string_view body, absl::Time deadline);
  // Reads until the head is in, parses it and leaves what follows it in raw_.
  absl::StatusOr<Head> ReadHead(absl::Time deadline);
  // One recv into raw_: false at the end of the stream. Waits for `wake_fd` too (then returns
  // true having read nothing).
  absl::StatusOr<bool> Fill(absl::Time deadline, int wake_fd = -1);
  absl::StatusOr<HttpAnswer> Exchange(std::string_view path, std::string_view body,
                                      absl::Time deadline, bool* answered);

  const std::string endpoint_;
  int fd_ = -1;
  std::string raw_;  // bytes read and not consumed yet
  // The streamed answer being read.
  Head stream_;
  ChunkDecoder chunks_;
  int64_t stream_left_ = 0;
};

}  // namespace ardma::cluster

#endif  // ARDMA_CORE_CLUSTER_HTTP_CLIENT_H_
