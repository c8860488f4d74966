// ByteStream: what a client connection reads and writes its frames through — a plain socket, or
// TLS over one (OpenSSL; docs/SECURITY.md). Clients name TLS with "tls://HOST:PORT".
//
// Thread-safe in the way Connection uses it: one reader at a time and one writer at a time, which
// may run concurrently (TLS serialises its own state internally, without blocking one on the other
// while it waits for the network).
#ifndef ARDMA_CORE_CLIENT_BYTE_STREAM_H_
#define ARDMA_CORE_CLIENT_BYTE_STREAM_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ardma {

// The client's TLS settings. Empty files: the system's trust store, no client certificate.
struct TlsOptions {
  std::string ca_file;    // certificates to trust for the server (PEM)
  std::string cert_file;  // this client's certificate chain, for mutual TLS (PEM)
  std::string key_file;   // its private key (PEM)
  std::string server_name;  // the name to verify in the server's certificate; empty: the host
  // From $ARDMA_TLS_CA, $ARDMA_TLS_CERT and $ARDMA_TLS_KEY where the fields are empty.
  TlsOptions WithEnvironment() const;
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  virtual int fd() const = 0;
  // Blocking, whole buffer; UNAVAILABLE on an error or an early end of stream.
  virtual absl::Status SendAll(std::string_view data) = 0;
  virtual absl::Status RecvExactly(char* out, size_t n) = 0;
  // Up to `n` bytes, waiting at most `timeout`: the count, 0 if nothing arrived in time, or
  // UNAVAILABLE when the peer closed the stream or it failed.
  virtual absl::StatusOr<size_t> RecvSome(char* out, size_t n, absl::Duration timeout) = 0;
  // Sets the limit of RecvExactly's waits (the handshake's and the connect's).
  virtual void SetRecvTimeout(absl::Duration timeout) = 0;
};

// A connected socket, closed by the stream if `owned`.
std::unique_ptr<ByteStream> PlainStream(int fd, bool owned);
// TLS over a connected socket (owned from the call on, also on failure): the handshake, with the
// server's certificate verified against `options` and `host` (a name or an address), within
// `timeout`. UNAVAILABLE if the handshake fails, with OpenSSL's reason.
absl::StatusOr<std::unique_ptr<ByteStream>> TlsStream(int fd, std::string_view host,
                                                      const TlsOptions& options,
                                                      absl::Duration timeout);

}  // namespace ardma

#endif  // ARDMA_CORE_CLIENT_BYTE_STREAM_H_
