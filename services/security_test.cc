// Authentication and permissions end to end (docs/SECURITY.md), over every transport: a server
// with an auth file, clients with good, wrong, missing and replayed credentials, and secrets with
// fewer permissions than everything.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/active/active_library.h"
#include "core/active/testdata/test_library.h"
#include "core/security/auth.h"
#include "core/testing/raw_socket.h"
#include "core/testing/test_server.h"
#include "core/wire/messages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/dfs/dfs_client.h"
#include "services/dht/dht_client.h"
#include "services/list/list_client.h"
#include "services/lock/lock_client.h"

namespace ardma {
namespace {

using ::testing::HasSubstr;

constexpr char kAdminSecret[] = "admin-secret-0123456789";
constexpr char kAppSecret[] = "app-secret-0123456789ab";
constexpr char kReaderSecret[] = "reader-secret-012345678";
constexpr char kLoaderSecret[] = "loader-secret-012345678";
constexpr char kLoader2Secret[] = "loader2-secret-01234567";

std::string TempDirFor(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  mkdir(dir.c_str(), 0700);
  return dir;
}

// A server that requires authentication, by default with the services' libraries preloaded (so a
// secret without `load` can use them).
// With `built_ins`, the services' names are reserved for their own code, as ardmad does.
std::unique_ptr<testing::TestServer> StartAuthServer(bool preload = true, bool built_ins = false) {
  ServerOptions options = testing::TestServerOptions();
  absl::StatusOr<security::AuthTable> table = security::AuthTable::Parse(
      absl::StrCat("admin ", kAdminSecret, " all\napp ", kAppSecret, " exec\nreader ",
                   kReaderSecret, " read:0\nloader ", kLoaderSecret, " load,exec\nloader2 ",
                   kLoader2Secret, " load,exec\n"),
      "test");
  EXPECT_TRUE(table.ok()) << table.status();
  options.handler.auth = std::make_shared<const security::AuthTable>(*table);
  // One directory per server: tests of other transports run in parallel processes.
  static int next = 0;
  std::string dir = TempDirFor(absl::StrCat("preload.", ::getpid(), ".", next++));
  for (const ActiveLibrary* lib : {&active_libraries::dht(), &active_libraries::list(),
                                   &active_libraries::lock(), &active_libraries::dfs()}) {
    std::ofstream(dir + "/" + std::string(lib->name()) + ".so", std::ios::binary) << lib->code();
  }
  if (preload) options.preload_dir = dir;
  if (built_ins) {
    options.built_in_services = {&active_libraries::dht(), &active_libraries::list(),
                                 &active_libraries::lock(), &active_libraries::dfs()};
  }
  absl::StatusOr<std::unique_ptr<testing::TestServer>> server = testing::TestServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

ClientOptions As(const std::string& name, const std::string& secret) {
  ClientOptions o;
  o.credentials = security::Credentials{name, secret};
  o.credentials_from_environment = false;
  o.connect_attempts = 1;
  return o;
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartAuthServer();
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<testing::TestServer> server_;
};

TEST_F(SecurityTest, TheRightSecretConnectsWithOneRoundTrip) {
  absl::StatusOr<std::unique_ptr<Client>> admin = server_->NewClient(As("admin", kAdminSecret));
  ASSERT_TRUE(admin.ok()) << admin.status();
  // The handshake is the connection's one round trip before its first call.
  uint64_t before = (*admin)->counters().round_trips.load();
  EXPECT_LE(before, 2u);  // AUTH (and, over UCX, UCX_CONNECT on the same connection)
  ASSERT_TRUE((*admin)->Write(4096 * 4, "hello").ok());
  absl::StatusOr<std::string> back = (*admin)->Read(4096 * 4, 5);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "hello");
  EXPECT_EQ((*admin)->counters().round_trips.load(), before + 2);  // nothing more per operation
  EXPECT_EQ(*testing::StatValue(**admin, "auth.ok"), 1u);
}

TEST_F(SecurityTest, WrongSecretAndUnknownNameAreRefusedAlike) {
  absl::StatusOr<std::unique_ptr<Client>> wrong =
      server_->NewClient(As("admin", "not-the-admin-secret-at-all"));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
  EXPECT_THAT(wrong.status().message(), HasSubstr("authentication failed"));
  absl::StatusOr<std::unique_ptr<Client>> unknown =
      server_->NewClient(As("mallory", "not-the-admin-secret-at-all"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(unknown.status().message(), wrong.status().message());
}

TEST_F(SecurityTest, NoSecretIsRefusedWithAClearMessage) {
  ClientOptions none;
  none.credentials_from_environment = false;
  none.connect_attempts = 1;
  absl::StatusOr<std::unique_ptr<Client>> client = server_->NewClient(none);
  absl::Status s = client.ok() ? (*client)->Ping() : client.status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(s.message(), HasSubstr("--auth-file"));
}

// Raw frames: a request before AUTH closes the connection; a proof recorded on one connection is
// refused on another (its challenge differs) and that connection is closed too.
TEST_F(SecurityTest, ReplayedProofAndRequestsBeforeAuthCloseTheConnection) {
  if (testing::TestTransport() != "tcp" && testing::TestTransport() != "unix") {
    GTEST_SKIP() << "raw frames go over TCP";  // the UCX suites bootstrap over the same code
  }
  testing::RawSocket early(server_->server().port());
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE(early.SendFrame(wire::Op::kPing, "x", 1, 1));
  std::optional<testing::RawResponse> refused = early.Receive();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->header.status, static_cast<uint16_t>(absl::StatusCode::kUnauthenticated));
  EXPECT_TRUE(early.WaitClosed());

  // A genuine exchange on connection A...
  testing::RawSocket a(server_->server().port());
  ASSERT_TRUE(a.ok());
  absl::StatusOr<wire::Hello> hello_a = wire::DecodeHello(a.hello());
  ASSERT_TRUE(hello_a.ok());
  ASSERT_TRUE(hello_a->auth_required);
  wire::AuthRequest req{.name = "app", .client_nonce = security::RandomNonce()};
  req.proof = security::ComputeProof(kAppSecret, security::Role::kClient, hello_a->nonce,
                                     req.client_nonce, "app");
  std::string auth;
  wire::EncodeAuthRequest(req, &auth);
  ASSERT_TRUE(a.SendFrame(wire::Op::kAuth, auth, 1, 1));
  std::optional<testing::RawResponse> ok = a.Receive();
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->header.status, 0);
  absl::StatusOr<wire::AuthResponse> granted = wire::DecodeAuthResponse(ok->payload);
  ASSERT_TRUE(granted.ok());
  EXPECT_EQ(granted->permissions, static_cast<uint32_t>(security::kExec));
  // ... an op beyond the secret's permission is refused and the connection stays open ...
  ASSERT_TRUE(a.SendFrame(wire::Op::kRead, "", 2, 1));
  std::optional<testing::RawResponse> denied = a.Receive();
  ASSERT_TRUE(denied.has_value());
  EXPECT_EQ(denied->header.status, static_cast<uint16_t>(absl::StatusCode::kPermissionDenied));
  ASSERT_TRUE(a.SendFrame(wire::Op::kPing, "still here", 3, 1));
  std::optional<testing::RawResponse> pong = a.Receive();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->payload, "still here");

  // ... and replayed byte for byte on connection B, whose challenge is another.
  testing::RawSocket b(server_->server().port());
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b.SendFrame(wire::Op::kAuth, auth, 1, 1));
  std::optional<testing::RawResponse> replayed = b.Receive();
  ASSERT_TRUE(replayed.has_value());
  EXPECT_EQ(replayed->header.status, static_cast<uint16_t>(absl::StatusCode::kUnauthenticated));
  EXPECT_TRUE(b.WaitClosed());
}

TEST_F(SecurityTest, ExecOnlyUsesEveryServiceButCannotWriteLoadOrReadStatsDetails) {
  absl::StatusOr<std::unique_ptr<Client>> app = server_->NewClient(As("app", kAppSecret));
  ASSERT_TRUE(app.ok()) << app.status();
  Client& c = **app;

  dht::DhtClient dht(&c, Mode::kActive);
  ASSERT_TRUE(dht.Put("t", "k", "v").ok());
  EXPECT_EQ(*dht.Get("t", "k"), "v");
  list::ListClient lists(&c, Mode::kActive);
  ASSERT_TRUE(lists.Append("l", int64_t{7}).ok());
  EXPECT_EQ(lists.ReadAll("l")->size(), 1u);
  lock::LockClient locks(&c, Mode::kActive);
  absl::StatusOr<lock::Grant> grant =
      locks.Acquire("m", lock::LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(grant.ok()) << grant.status();
  ASSERT_TRUE(locks.Release(*grant).ok());
  dfs::DfsClient fs(&c, Mode::kActive);
  ASSERT_TRUE(fs.Mkdir("/d").ok());
  ASSERT_TRUE(fs.WriteFile("/d/f", "data").ok());
  EXPECT_EQ(*fs.ReadFile("/d/f"), "data");

  EXPECT_EQ(c.Write(4096 * 4, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(c.CompareAndSwap(4096 * 4, 0, 1).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(c.Read(4096 * 4, 8).status().code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<wire::CodeHash> load =
      c.Load(wire::CodeKind::kNative, "x", active_libraries::dht().code());
  EXPECT_EQ(load.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(load.status().message(), HasSubstr("'load' permission"));
  // The RDMA-mode services need read and write: refused, not misbehaving.
  dht::DhtClient rdma(&c, Mode::kRdma);
  EXPECT_EQ(rdma.Get("t", "k").status().code(), absl::StatusCode::kPermissionDenied);

  absl::StatusOr<std::vector<wire::StatsEntry>> stats = c.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(testing::StatValue(c, "heap.size").ok());
  EXPECT_EQ(testing::StatValue(c, "heap.allocated").status().code(),
            absl::StatusCode::kNotFound);  // details are for admin
  EXPECT_EQ(testing::StatValue(c, "requests.read").status().code(), absl::StatusCode::kNotFound);

  // The connection is still usable after every refusal.
  EXPECT_EQ(*dht.Get("t", "k"), "v");
}

TEST_F(SecurityTest, ReadLimitedToARegionReadsItAndNothingElse) {
  absl::StatusOr<std::unique_ptr<Client>> admin = server_->NewClient(As("admin", kAdminSecret));
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE((*admin)->Write(4096 * 4, "shared").ok());
  absl::StatusOr<std::unique_ptr<Client>> reader = server_->NewClient(As("reader", kReaderSecret));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(*(*reader)->Read(4096 * 4, 6), "shared");
  EXPECT_EQ((*reader)->Write(4096 * 4, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*reader)->FetchAdd(4096 * 4, 1).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*reader)->Ping().code(), absl::StatusCode::kOk);
  EXPECT_EQ(*(*admin)->Read(4096 * 4, 6), "shared");  // the refused writes changed nothing
  EXPECT_GE(*testing::StatValue(**admin, "auth.permission_denied"), 2u);
}

// A secret with `load` but not `admin` cannot take over names another secret's library holds.
TEST_F(SecurityTest, ALoadThatWouldRepointAnotherSecretsNamesIsRefused) {
  absl::StatusOr<std::unique_ptr<Client>> loader = server_->NewClient(As("loader", kLoaderSecret));
  ASSERT_TRUE(loader.ok()) << loader.status();
  const ActiveLibrary& hijack = active_libraries::hijack();
  absl::StatusOr<wire::CodeHash> loaded =
      (*loader)->Load(hijack.kind(), hijack.name(), hijack.code());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied) << loaded.status();
  EXPECT_THAT(loaded.status().message(), HasSubstr("re-point 'dht."));
  EXPECT_FALSE(*(*loader)->HasCode(hijack.hash()));
  // Names nobody holds are free to take; the services still answer as before.
  dfs::DfsClient fs(loader->get(), Mode::kActive);
  ASSERT_TRUE(fs.WriteFile("/f", "still the DHT").ok());
  EXPECT_EQ(*fs.ReadFile("/f"), "still the DHT");
}

// A secret with `load` cannot take a built-in service's names before the service is loaded, and so
// keep every other non-admin from loading the real service (issue 32, D: it could). The service's
// own code loads as before, and an admin may still load other code under those names.
TEST(SecurityReservedNamesTest, ABuiltInServicesNamesAreTheirsOnly) {
  std::unique_ptr<testing::TestServer> server =
      StartAuthServer(/*preload=*/false, /*built_ins=*/true);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> loader = server->NewClient(As("loader", kLoaderSecret));
  ASSERT_TRUE(loader.ok()) << loader.status();
  const ActiveLibrary& hijack = active_libraries::hijack();
  absl::StatusOr<wire::CodeHash> taken =
      (*loader)->Load(hijack.kind(), hijack.name(), hijack.code());
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kPermissionDenied) << taken.status();
  EXPECT_THAT(taken.status().message(), HasSubstr("built-in service 'dht'"));
  EXPECT_FALSE(*(*loader)->HasCode(hijack.hash()));

  absl::StatusOr<std::unique_ptr<Client>> other = server->NewClient(As("loader2", kLoader2Secret));
  ASSERT_TRUE(other.ok()) << other.status();
  dht::DhtClient dht(other->get(), Mode::kActive);
  ASSERT_TRUE(dht.Put("t", "k", "v").ok());  // loads the real DHT
  EXPECT_EQ(*dht.Get("t", "k"), "v");

  absl::StatusOr<std::unique_ptr<Client>> admin = server->NewClient(As("admin", kAdminSecret));
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_TRUE((*admin)->Load(hijack.kind(), hijack.name(), hijack.code()).ok());
}

// Even an admin's re-pointing of dht.* leaves the DFS and the lock manager calling the DHT they
// were built against (their LOAD named it by hash); only calls by bare name see the new code.
TEST(SecurityPinningTest, LibrariesKeepCallingTheVersionsTheyWereBuiltAgainst) {
  std::unique_ptr<testing::TestServer> server = StartAuthServer(/*preload=*/false);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<std::unique_ptr<Client>> admin = server->NewClient(As("admin", kAdminSecret));
  ASSERT_TRUE(admin.ok()) << admin.status();
  dfs::DfsClient fs(admin->get(), Mode::kActive);
  ASSERT_TRUE(fs.WriteFile("/before", "1").ok());
  lock::LockClient locks(admin->get(), Mode::kActive);
  ASSERT_TRUE(
      locks.Release(*locks.Acquire("m", lock::LockMode::kExclusive, absl::Seconds(5))).ok());

  const ActiveLibrary& hijack = active_libraries::hijack();
  ASSERT_TRUE((*admin)->Load(hijack.kind(), hijack.name(), hijack.code()).ok());
  absl::StatusOr<std::string> by_name = (*admin)->Execute("dht.put", "");
  EXPECT_EQ(by_name.status().code(), absl::StatusCode::kDataLoss);  // the name was re-pointed

  ASSERT_TRUE(fs.WriteFile("/after", "2").ok());  // dfs.* -> its own dht.put, not "hijacked"
  EXPECT_EQ(*fs.ReadFile("/before"), "1");
  EXPECT_EQ(*fs.ReadFile("/after"), "2");
  absl::StatusOr<lock::Grant> grant =
      locks.Acquire("n", lock::LockMode::kExclusive, absl::Seconds(5));
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_TRUE(locks.Release(*grant).ok());
}

TEST(ProtectedModeTest, NoNonLoopbackListenerWithoutAuthUnlessInsecure) {
  ServerOptions options = testing::TestServerOptions();
  options.listen = "0.0.0.0:0";
  options.unix_socket.clear();
  absl::StatusOr<std::unique_ptr<Server>> refused = Server::Start(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("without authentication"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--insecure"));

  options.insecure = true;
  absl::StatusOr<std::unique_ptr<Server>> insecure = Server::Start(options);
  EXPECT_TRUE(insecure.ok()) << insecure.status();

  options.insecure = false;
  options.handler.auth = std::make_shared<const security::AuthTable>(
      *security::AuthTable::Parse(absl::StrCat("admin ", kAdminSecret, " all"), "test"));
  absl::StatusOr<std::unique_ptr<Server>> with_auth = Server::Start(options);
  EXPECT_TRUE(with_auth.ok()) << with_auth.status();
}

TEST(ProtectedModeTest, UnixSocketIsPrivateByDefault) {
  ServerOptions options = testing::TestServerOptions();
  // One path per process: the suite runs for several transports at once.
  options.unix_socket = absl::StrCat(::testing::TempDir(), "/private.", ::getpid(), ".sock");
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st;
  ASSERT_EQ(stat(options.unix_socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace ardma
