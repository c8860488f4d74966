#include "core/client/byte_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/net/socket_connect.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

// Waits for `events` on fd until `deadline`: true if they came.
bool WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(left))));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the next I/O call report it
  }
}

std::string OpenSslError(std::string_view what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return absl::StrCat(std::string(what), ": ", buf);
}

// A socket BIO that never raises SIGPIPE (send with MSG_NOSIGNAL): a client library must not
// kill its process when the server goes away mid-write.
int BioWrite(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(static_cast<int>(BIO_get_fd(bio, nullptr)), data, static_cast<size_t>(len),
                     MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int BioRead(BIO* bio, char* out, int len) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(static_cast<int>(BIO_get_fd(bio, nullptr)), out, static_cast<size_t>(len), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

// A BIO over `fd` that writes with BioWrite (and reads, and answers controls, like a socket BIO).
BIO* NoSigpipeBio(int fd) {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ardma-socket");
    const BIO_METHOD* socket = BIO_s_socket();
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(socket));
    BIO_meth_set_create(m, BIO_meth_get_create(socket));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(socket));
    return m;
  }();
  BIO* bio = BIO_new(method);
  if (bio != nullptr) BIO_set_fd(bio, fd, BIO_NOCLOSE);
  return bio;
}

class Plain : public ByteStream {
 public:
  Plain(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~Plain() override {
    if (owned_) ::close(fd_);
  }
  int fd() const override { return fd_; }
  absl::Status SendAll(std::string_view data) override { return ardma::SendAll(fd_, data); }
  absl::Status RecvExactly(char* out, size_t n) override { return ardma::RecvExactly(fd_, out, n); }
  absl::StatusOr<size_t> RecvSome(char* out, size_t n, absl::Duration timeout) override {
    if (!WaitFor(fd_, POLLIN, absl::Now() + timeout)) return 0;
    ssize_t got = ::recv(fd_, out, n, MSG_DONTWAIT);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) return absl::UnavailableError("connection closed by the peer");
    if (errno == EAGAIN || errno == EINTR) return 0;
    return ErrnoUnavailable("recv", errno);
  }
  void SetRecvTimeout(absl::Duration timeout) override {
    timeval limit = absl::ToTimeval(timeout);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  }

 private:
  const int fd_;
  const bool owned_;
};

// TLS on a non-blocking socket. OpenSSL's SSL object takes one call at a time, so every call is
// made under mu_; waiting for the network happens outside it, so a reader waiting for a response
// never holds up a writer.
class Tls : public ByteStream {
 public:
  Tls(int fd, SSL_CTX* ctx, SSL* ssl) : fd_(fd), ctx_(ctx), ssl_(ssl) {}
  ~Tls() override {
    {
      absl::MutexLock lock(&mu_);
      SSL_shutdown(ssl_);  // best effort: the close_notify, without waiting for the peer's
      SSL_free(ssl_);
    }
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  int fd() const override { return fd_; }

  absl::Status Handshake(absl::Time deadline) {
    for (;;) {
      int want;
      {
        absl::MutexLock lock(&mu_);
        int r = SSL_connect(ssl_);
        if (r == 1) return absl::OkStatus();
        want = SSL_get_error(ssl_, r);
        if (want != SSL_ERROR_WANT_READ && want != SSL_ERROR_WANT_WRITE) {
          long verify = SSL_get_verify_result(ssl_);
          std::string reason = verify != X509_V_OK
                                   ? absl::StrCat("the server's certificate is not trusted: ",
                                                  X509_verify_cert_error_string(verify))
                                   : OpenSslError("TLS handshake");
          return absl::UnavailableError(reason);
        }
      }
      if (!WaitFor(fd_, want == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        return absl::DeadlineExceededError("TLS handshake timed out");
      }
    }
  }

  absl::Status SendAll(std::string_view data) override {
    while (!data.empty()) {
      int want;
      {
        absl::MutexLock lock(&mu_);
        int r = SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
        if (r > 0) {
          data.remove_prefix(static_cast<size_t>(r));
          continue;
        }
        want = SSL_get_error(ssl_, r);
        if (want != SSL_ERROR_WANT_READ && want != SSL_ERROR_WANT_WRITE) {
          return absl::UnavailableError(OpenSslError("TLS write"));
        }
      }
      WaitFor(fd_, want == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
              absl::Now() + absl::Milliseconds(100));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> RecvSome(char* out, size_t n, absl::Duration timeout) override {
    absl::Time deadline = absl::Now() + timeout;
    bool nothing_buffered;
    {
      absl::MutexLock lock(&mu_);
      nothing_buffered = SSL_pending(ssl_) == 0 && !SSL_has_pending(ssl_);
    }
    // Usually nothing is buffered: wait for the socket first instead of a read that fails.
    if (nothing_buffered && !WaitFor(fd_, POLLIN, deadline)) return 0;
    for (;;) {
      int want;
      {
        absl::MutexLock lock(&mu_);
        int r = SSL_read(ssl_, out, static_cast<int>(std::min<size_t>(n, 1 << 30)));
        if (r > 0) return static_cast<size_t>(r);
        want = SSL_get_error(ssl_, r);
        if (want == SSL_ERROR_ZERO_RETURN) {
          return absl::UnavailableError("connection closed by the peer");
        }
        if (want != SSL_ERROR_WANT_READ && want != SSL_ERROR_WANT_WRITE) {
          return absl::UnavailableError(OpenSslError("TLS read"));
        }
      }
      if (!WaitFor(fd_, want == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) return 0;
    }
  }

  absl::Status RecvExactly(char* out, size_t n) override {
    absl::Time deadline = absl::Now() + recv_timeout_;
    while (n > 0) {
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return absl::UnavailableError("recv: timed out");
      absl::StatusOr<size_t> got = RecvSome(out, n, left);
      if (!got.ok()) return got.status();
      out += *got;
      n -= *got;
    }
    return absl::OkStatus();
  }

  void SetRecvTimeout(absl::Duration timeout) override { recv_timeout_ = timeout; }

 private:
  const int fd_;
  SSL_CTX* const ctx_;
  absl::Mutex mu_;
  SSL* const ssl_ ABSL_PT_GUARDED_BY(mu_);
  absl::Duration recv_timeout_ = absl::Seconds(30);
};

}  // namespace

TlsOptions TlsOptions::WithEnvironment() const {
  TlsOptions o = *this;
  auto fill = [](std::string& field, const char* name) {
    const char* v = std::getenv(name);
    if (field.empty() && v != nullptr) field = v;
  };
  fill(o.ca_file, "ARDMA_TLS_CA");
  fill(o.cert_file, "ARDMA_TLS_CERT");
  fill(o.key_file, "ARDMA_TLS_KEY");
  return o;
}

std::unique_ptr<ByteStream> PlainStream(int fd, bool owned) {
  return std::make_unique<Plain>(fd, owned);
}

absl::StatusOr<std::unique_ptr<ByteStream>> TlsStream(int fd, std::string_view host,
                                                      const TlsOptions& options,
                                                      absl::Duration timeout) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    ::close(fd);
    return absl::InternalError(OpenSslError("SSL_CTX_new"));
  }
  auto fail = [&](absl::Status s) {
    SSL_CTX_free(ctx);
    ::close(fd);
    return s;
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  int loaded = options.ca_file.empty()
                   ? SSL_CTX_set_default_verify_paths(ctx)
                   : SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return fail(absl::InvalidArgumentError(OpenSslError(absl::StrCat("TLS CA ", options.ca_file))));
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      return fail(absl::InvalidArgumentError(OpenSslError(
          absl::StrCat("TLS client certificate ", options.cert_file, " / key ", options.key_file))));
    }
  }
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return fail(absl::InternalError(OpenSslError("SSL_new")));
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  std::string name = options.server_name.empty() ? std::string(host) : options.server_name;
  if (!name.empty() && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  unsigned char ip[16];
  bool is_ip = inet_pton(AF_INET, name.c_str(), ip) == 1 || inet_pton(AF_INET6, name.c_str(), ip) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, name.c_str());
    SSL_set1_host(ssl, name.c_str());
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  BIO* bio = NoSigpipeBio(fd);
  if (bio == nullptr) {
    SSL_free(ssl);
    return fail(absl::InternalError(OpenSslError("BIO_new")));
  }
  SSL_set_bio(ssl, bio, bio);
  auto stream = std::make_unique<Tls>(fd, ctx, ssl);  // owns fd, ctx and ssl from here
  ARDMA_RETURN_IF_ERROR(stream->Handshake(absl::Now() + timeout));
  return std::unique_ptr<ByteStream>(std::move(stream));
}

}  // namespace ardma
