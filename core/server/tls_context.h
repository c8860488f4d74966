// The TLS side of the server's TCP listener (docs/SECURITY.md): its Asio SSL context from the
// options' PEM files, and who a verified client certificate names.
#ifndef ARDMA_CORE_SERVER_TLS_CONTEXT_H_
#define ARDMA_CORE_SERVER_TLS_CONTEXT_H_

#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/server/server.h"

namespace ardma {

// The listener's context (TLS 1.2 or later; with tls_ca, client certificates required); null
// without tls_cert. INVALID_ARGUMENT naming the flag for a file that cannot be used.
absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> MakeTlsContext(
    const ServerOptions& options);
// The common name of a verified client certificate ("" if none).
std::string PeerCommonName(SSL* ssl);

}  // namespace ardma

#endif  // ARDMA_CORE_SERVER_TLS_CONTEXT_H_
