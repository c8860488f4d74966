// TLS on the TCP listener (docs/SECURITY.md): connecting with a trusted certificate, refusing an
// untrusted one, mutual TLS as the way a client authenticates, and plain clients kept out.
#include <cstdlib>
#include <fstream>
#include <future>
#include <vector>
#include <string>

#include "core/cli/client_flags.h"
#include "core/client/client.h"
#include "core/security/auth.h"
#include "core/server/server.h"
#include "core/testing/test_certificates.h"
#include "core/testing/test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;

constexpr char kAppSecret[] = "app-secret-0123456789ab";

using Certificates = testing::TestCertificates;

ServerOptions TlsServerOptions(const std::string& cert, const std::string& key) {
  ServerOptions options = testing::TestServerOptions();
  options.unix_socket.clear();
  options.ucx = ServerOptions::Ucx::kOff;
  options.tls_cert = Certificates::Get().Path(cert);
  options.tls_key = Certificates::Get().Path(key);
  return options;
}

// Mutual TLS: client certificates signed by ca.pem, and "app" may read and write.
ServerOptions MutualTlsServerOptions() {
  ServerOptions options = TlsServerOptions("server.pem", "server.key");
  options.tls_ca = Certificates::Get().Path("ca.pem");
  options.handler.auth = std::make_shared<const security::AuthTable>(
      *security::AuthTable::Parse(std::string("app ") + kAppSecret + " read,write", "test"));
  return options;
}

ClientOptions TlsClient(const std::string& ca) {
  ClientOptions o;
  o.connect_attempts = 1;
  o.credentials_from_environment = false;
  if (!ca.empty()) o.tls.ca_file = Certificates::Get().Path(ca);
  return o;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Certificates::Get().ok()) << "openssl failed"; }
};

TEST_F(TlsTest, ATrustedServerServesEveryOpOverTls) {
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Start(TlsServerOptions("server.pem", "server.key"));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect("tls://" + (*server)->address(), TlsClient("ca.pem"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Ping().ok());
  std::string big(1 << 20, 'x');  // many TLS records each way
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE((*c)->Write(1 << 20, big).ok());
  absl::StatusOr<std::string> back = (*c)->Read(1 << 20, static_cast<uint32_t>(big.size()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, big);
  // Asynchronous calls go through the same stream from the background reader.
  std::vector<std::future<absl::StatusOr<std::string>>> calls;
  for (int i = 0; i < 100; ++i) calls.push_back((*c)->ExecuteAsync("no.such.function", ""));
  for (auto& f : calls) EXPECT_EQ(f.get().status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*c)->Ping().ok());
}

TEST_F(TlsTest, AnUntrustedCertificateIsRefused) {
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Start(TlsServerOptions("evil.pem", "evil.key"));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect("tls://" + (*server)->address(), TlsClient("ca.pem"));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("not trusted"));
  // A certificate for another name is refused too: the server's, asked for as "example.com".
  absl::StatusOr<std::unique_ptr<Server>> good =
      Server::Start(TlsServerOptions("server.pem", "server.key"));
  ASSERT_TRUE(good.ok());
  ClientOptions wrong_name = TlsClient("ca.pem");
  wrong_name.tls.server_name = "example.com";
  EXPECT_FALSE(Client::Connect("tls://" + (*good)->address(), wrong_name).ok());
}

TEST_F(TlsTest, PlainClientsAreKeptOutAndTlsCarriesSecrets) {
  ServerOptions options = TlsServerOptions("server.pem", "server.key");
  options.handler.auth = std::make_shared<const security::AuthTable>(
      *security::AuthTable::Parse(std::string("app ") + kAppSecret + " exec", "test"));
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions plain = TlsClient("");
  plain.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<Client>> p = Client::Connect((*server)->address(), plain);
  EXPECT_FALSE(p.ok() && (*p)->Ping().ok());

  ClientOptions with_secret = TlsClient("ca.pem");
  with_secret.credentials = security::Credentials{"app", kAppSecret};
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect("tls://" + (*server)->address(), with_secret);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Ping().ok());
  EXPECT_EQ((*c)->Write(1 << 20, "x").code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(TlsTest, MutualTlsAuthenticatesByTheCertificatesName) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(MutualTlsServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();

  ClientOptions with_cert = TlsClient("ca.pem");
  with_cert.tls.cert_file = Certificates::Get().Path("app.pem");
  with_cert.tls.key_file = Certificates::Get().Path("app.key");
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect("tls://" + (*server)->address(), with_cert);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Write(1 << 20, "mtls").ok());  // no secret given: the certificate sufficed
  EXPECT_EQ(*(*c)->Read(1 << 20, 4), "mtls");
  EXPECT_EQ((*c)->Execute("nothing", "").status().code(), absl::StatusCode::kPermissionDenied);

  // Without a certificate the handshake fails.
  ClientOptions no_cert = TlsClient("ca.pem");
  absl::StatusOr<std::unique_ptr<Client>> refused =
      Client::Connect("tls://" + (*server)->address(), no_cert);
  EXPECT_FALSE(refused.ok() && (*refused)->Ping().ok());
}

// A tool's --server, --tls-ca, --tls-cert and --tls-key (core/cli/client_flags.h) reach its client.
TEST_F(TlsTest, TheToolsTlsFlagsReachTheClient) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(MutualTlsServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();

  FlagSet flags("tool", "usage");
  ClientFlags client;
  client.Declare(flags);
  absl::StatusOr<std::vector<std::string>> rest = flags.Parse(
      {"--server", "tls://" + (*server)->address(), "--tls-ca", Certificates::Get().Path("ca.pem"),
       "--tls-cert=" + Certificates::Get().Path("app.pem"),
       "--tls-key=" + Certificates::Get().Path("app.key")});
  ASSERT_TRUE(rest.ok()) << rest.status();
  absl::StatusOr<ClientOptions> with_flags = client.ConnectOptions(TlsClient(""));
  ASSERT_TRUE(with_flags.ok()) << with_flags.status();
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(client.server, *with_flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Write(1 << 20, "flag").ok());  // authenticated by the certificate

  // The same without --tls-cert and --tls-key: the server refuses the handshake.
  ClientFlags no_cert = client;
  no_cert.tls.cert_file.clear();
  no_cert.tls.key_file.clear();
  absl::StatusOr<std::unique_ptr<Client>> refused =
      Client::Connect(no_cert.server, *no_cert.ConnectOptions(TlsClient("")));
  EXPECT_FALSE(refused.ok() && (*refused)->Ping().ok());
}

TEST_F(TlsTest, BadServerFilesFailTheStartClearly) {
  ServerOptions options = TlsServerOptions("server.pem", "missing.key");
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("--tls-key"));
  options.tls_key.clear();
  EXPECT_THAT(Server::Start(options).status().message(), HasSubstr("go together"));
}

}  // namespace
}  // namespace ardma
