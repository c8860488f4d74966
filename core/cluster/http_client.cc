#include "core/cluster/http_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma::cluster {
namespace {

constexpr size_t kMaxHead = 64 * 1024;   // an answer's status line and headers
constexpr size_t kMaxSizeLine = 1024;    // a chunk's size line (with any extensions)
constexpr size_t kRecvBytes = 64 * 1024;  // read at a time

absl::Status NotHttp(const std::string& endpoint, std::string_view why) {
  return absl::DataLossError(
      absl::StrCat(endpoint, " does not answer in HTTP/1.1 (", ToAbsl(why), ")"));
}

// Where the line that starts at `pos` ends (its CRLF), or npos while it has not all come;
// DATA_LOSS once what has come is longer than `limit`.
absl::StatusOr<size_t> LineEnd(const std::string& in, size_t pos, size_t limit,
                               const char* what) {
  size_t eol = in.find("\r\n", pos);
  if (eol == std::string::npos && in.size() - pos > limit) {
    return absl::DataLossError(absl::StrCat(what, " too long"));
  }
  return eol;
}

}  // namespace

absl::StatusOr<bool> ChunkDecoder::Feed(std::string& in, std::string* out) {
  size_t pos = 0;
  for (bool more = true; more;) {
    switch (state_) {
      case State::kSize: {
        ARDMA_ASSIGN_OR_RETURN(size_t eol, LineEnd(in, pos, kMaxSizeLine, "chunk size line"));
        if (eol == std::string::npos) {
          more = false;
          break;
        }
        absl::string_view line(in.data() + pos, eol - pos);
        line = line.substr(0, line.find(';'));  // chunk extensions are ignored
        line = absl::StripAsciiWhitespace(line);
        uint64_t size = 0;
        if (line.empty() || line.size() > 15 || !absl::SimpleHexAtoi(line, &size)) {
          return absl::DataLossError(absl::StrCat("bad chunk size '", line, "'"));
        }
        pos = eol + 2;
        left_ = size;
        state_ = size == 0 ? State::kTrailer : State::kData;
        break;
      }
      case State::kData: {
        size_t n = std::min<uint64_t>(left_, in.size() - pos);
        out->append(in, pos, n);
        pos += n;
        left_ -= n;
        if (left_ > 0) {
          more = false;
        } else {
          state_ = State::kDataEnd;
        }
        break;
      }
      case State::kDataEnd:
        if (in.size() - pos < 2) {
          more = false;
        } else if (in.compare(pos, 2, "\r\n") != 0) {
          return absl::DataLossError("a chunk does not end with CRLF");
        } else {
          pos += 2;
          state_ = State::kSize;
        }
        break;
      case State::kTrailer: {
        ARDMA_ASSIGN_OR_RETURN(size_t eol, LineEnd(in, pos, kMaxHead, "chunked trailer"));
        if (eol == std::string::npos) {
          more = false;
          break;
        }
        if (eol == pos) state_ = State::kDone;  // the empty line that ends the body
        pos = eol + 2;
        break;
      }
      case State::kDone:
        more = false;
        break;
    }
  }
  in.erase(0, pos);
  return state_ == State::kDone;
}

void HttpConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  raw_.clear();
}

absl::Status HttpConnection::Send(std::string_view path, std::string_view body,
                                  absl::Time deadline) {
  if (fd_ < 0) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(endpoint_, ": no time left to connect"));
    }
    ARDMA_ASSIGN_OR_RETURN(fd_, ConnectSocket(endpoint_, left));
    raw_.clear();
  }
  std::string request = absl::StrCat("POST ", ToAbsl(path), " HTTP/1.1\r\nHost: ", endpoint_,
                                     "\r\nContent-Type: application/json\r\nContent-Length: ",
                                     body.size(), "\r\n\r\n", ToAbsl(body));
  return SendAll(fd_, request);
}

absl::StatusOr<bool> HttpConnection::Fill(absl::Time deadline, int wake_fd) {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int ms = -1;  // no deadline: wait
    if (deadline != absl::InfiniteFuture()) {
      absl::Duration left = deadline - absl::Now();
      ms = left <= absl::ZeroDuration()
               ? 0
               : static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 1, 1 << 30));
    }
    int ready = ::poll(fds, wake_fd >= 0 ? 2 : 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return ErrnoUnavailable("poll", errno);
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrCat(endpoint_, ": no answer in time"));
    }
    if (fds[0].revents == 0) return true;  // woken
    size_t had = raw_.size();
    raw_.resize(had + kRecvBytes);
    ssize_t got = ::recv(fd_, raw_.data() + had, kRecvBytes, 0);
    raw_.resize(had + std::max<ssize_t>(got, 0));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoUnavailable(absl::StrCat("recv from ", endpoint_), errno);
    return got > 0;
  }
}

absl::StatusOr<HttpConnection::Head> HttpConnection::ReadHead(absl::Time deadline) {
  size_t end;
  while ((end = raw_.find("\r\n\r\n")) == std::string::npos) {
    if (raw_.size() > kMaxHead) return NotHttp(endpoint_, "headers too long");
    bool had_bytes = !raw_.empty();
    ARDMA_ASSIGN_OR_RETURN(bool more, Fill(deadline));
    if (!more) {
      if (!had_bytes) {
        return absl::UnavailableError(
            absl::StrCat(endpoint_, " closed the connection without answering"));
      }
      return NotHttp(endpoint_, "the answer ended inside its headers");
    }
  }
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(raw_).substr(0, end), "\r\n");
  Head head;
  absl::string_view status = lines[0];
  if (!absl::StartsWith(status, "HTTP/1.") || status.size() < 12 || status[8] != ' ' ||
      !absl::SimpleAtoi(status.substr(9, 3), &head.status)) {
    return NotHttp(endpoint_, "no HTTP status line");
  }
  head.close = absl::StartsWith(status, "HTTP/1.0");
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) return NotHttp(endpoint_, "a header without a colon");
    std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    std::string value =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    if (name == "content-length") {
      if (!absl::SimpleAtoi(value, &head.content_length) || head.content_length < 0) {
        return NotHttp(endpoint_, "a bad Content-Length");
      }
    } else if (name == "transfer-encoding") {
      head.chunked = absl::StrContains(value, "chunked");
    } else if (name == "connection") {
      head.close = absl::StrContains(value, "close");
    }
  }
  if (head.chunked) head.content_length = -1;
  raw_.erase(0, end + 4);
  return head;
}

absl::StatusOr<HttpAnswer> HttpConnection::Exchange(std::string_view path, std::string_view body,
                                                    absl::Time deadline, bool* answered) {
  ARDMA_RETURN_IF_ERROR(Send(path, body, deadline));
  ARDMA_ASSIGN_OR_RETURN(Head head, ReadHead(deadline));
  *answered = true;
  HttpAnswer answer{.status = head.status};
  if (head.chunked) {
    ChunkDecoder chunks;
    for (;;) {
      ARDMA_ASSIGN_OR_RETURN(bool done, chunks.Feed(raw_, &answer.body));
      if (done) break;
      ARDMA_ASSIGN_OR_RETURN(bool more, Fill(deadline));
      if (!more) return NotHttp(endpoint_, "the answer ended inside a chunk");
    }
  } else if (head.content_length >= 0) {
    while (raw_.size() < static_cast<size_t>(head.content_length)) {
      ARDMA_ASSIGN_OR_RETURN(bool more, Fill(deadline));
      if (!more) return NotHttp(endpoint_, "the answer ended before its Content-Length");
    }
    answer.body = raw_.substr(0, head.content_length);
    raw_.erase(0, head.content_length);
  } else {
    head.close = true;  // the body runs to the end of the connection
    for (;;) {
      ARDMA_ASSIGN_OR_RETURN(bool more, Fill(deadline));
      if (!more) break;
    }
    answer.body = std::move(raw_);
  }
  if (head.close) Close();
  return answer;
}

absl::StatusOr<HttpAnswer> HttpConnection::Post(std::string_view path, std::string_view body,
                                                absl::Time deadline) {
  for (int attempt = 0;; ++attempt) {
    const bool kept = fd_ >= 0;
    bool answered = false;
    absl::StatusOr<HttpAnswer> answer = Exchange(path, body, deadline, &answered);
    if (answer.ok()) return answer;
    Close();
    // A kept connection the server had closed meanwhile: nothing reached it; once more anew.
    if (!kept || answered || attempt > 0 || !absl::IsUnavailable(answer.status())) return answer;
  }
}

absl::StatusOr<int> HttpConnection::StartStream(std::string_view path, std::string_view body,
                                                absl::Time deadline) {
  Close();
  absl::Status sent = Send(path, body, deadline);
  absl::StatusOr<Head> head = sent.ok() ? ReadHead(deadline) : absl::StatusOr<Head>(sent);
  if (!head.ok()) {
    Close();
    return head.status();
  }
  stream_ = *head;
  chunks_ = ChunkDecoder();
  stream_left_ = stream_.content_length;
  return stream_.status;
}

absl::StatusOr<bool> HttpConnection::ReadStream(std::string* out, absl::Time deadline,
                                                int wake_fd) {
  if (fd_ < 0) return false;
  for (;;) {
    size_t had = out->size();
    if (stream_.chunked) {
      ARDMA_ASSIGN_OR_RETURN(bool done, chunks_.Feed(raw_, out));
      if (done) return false;
    } else if (stream_left_ >= 0) {
      size_t n = std::min<uint64_t>(stream_left_, raw_.size());
      out->append(raw_, 0, n);
      raw_.erase(0, n);
      stream_left_ -= static_cast<int64_t>(n);
      if (stream_left_ == 0) return false;
    } else {
      out->append(raw_);
      raw_.clear();
    }
    if (out->size() > had) return true;
    size_t before = raw_.size();
    absl::StatusOr<bool> more = Fill(deadline, wake_fd);
    if (absl::IsDeadlineExceeded(more.status())) return true;  // nothing yet: still open
    ARDMA_RETURN_IF_ERROR(more.status());
    if (!*more) return false;
    if (raw_.size() == before) return true;  // woken
  }
}

}  // namespace ardma::cluster
