#include "core/server/tls_context.h"

#include "absl/strings/str_cat.h"

namespace ardma {

namespace asio = boost::asio;

std::string PeerCommonName(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  char cn[256] = "";
  int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  X509_free(cert);
  return n > 0 ? std::string(cn, static_cast<size_t>(n)) : std::string();
}

absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const ServerOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (o.tls_cert.empty()) {
    if (!o.tls_ca.empty()) return absl::InvalidArgumentError("--tls-ca needs --tls-cert");
    return nullptr;
  }
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1,
                   ec);
  if (ctx->use_certificate_chain_file(o.tls_cert, ec); ec) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert ", o.tls_cert, ": ", ec.message()));
  }
  if (ctx->use_private_key_file(o.tls_key, asio::ssl::context::pem, ec); ec) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", o.tls_key, ": ", ec.message()));
  }
  if (!o.tls_ca.empty()) {
    if (ctx->load_verify_file(o.tls_ca, ec); ec) {
      return absl::InvalidArgumentError(absl::StrCat("--tls-ca ", o.tls_ca, ": ", ec.message()));
    }
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

}  // namespace ardma
