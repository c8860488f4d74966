#include "core/security/auth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::security {
namespace {

using ::testing::HasSubstr;

constexpr char kSecret[] = "0123456789abcdef0123";

std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

TEST(GrantTest, ParsesPermissionsAndRegionLimits) {
  absl::StatusOr<Grant> g = ParseGrant("read:1,exec");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Has(kExec));
  EXPECT_FALSE(g->Has(kWrite));
  EXPECT_TRUE(g->MayRead(1));
  EXPECT_FALSE(g->MayRead(0));
  EXPECT_FALSE(g->MayWrite(1));
  EXPECT_EQ(g->ToString(), "read:1,exec");

  g = ParseGrant("read:1,read");  // an unlimited grant wins over a limited one
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->MayRead(0));

  g = ParseGrant("all");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->permissions, kAllPermissions & ~kPeer);  // a member's permission is named only
  EXPECT_EQ(g->ToString(), "read,write,exec,load,admin");
  EXPECT_EQ(ParseGrant("all,peer")->permissions, kAllPermissions);

  EXPECT_THAT(ParseGrant("read,fly").status().message(), HasSubstr("unknown permission 'fly'"));
  EXPECT_THAT(ParseGrant("exec:1").status().message(), HasSubstr("only read and write"));
  EXPECT_THAT(ParseGrant("read:x").status().message(), HasSubstr("bad region"));
}

TEST(ProofTest, DependsOnEveryInputAndComparesExactly) {
  Nonce s = RandomNonce(), c = RandomNonce();
  EXPECT_NE(s, c);
  Proof p = ComputeProof(kSecret, Role::kClient, s, c, "app");
  EXPECT_TRUE(ProofsEqual(p, ComputeProof(kSecret, Role::kClient, s, c, "app")));
  EXPECT_FALSE(ProofsEqual(p, ComputeProof(kSecret, Role::kServer, s, c, "app")));
  EXPECT_FALSE(ProofsEqual(p, ComputeProof("0123456789abcdef0124", Role::kClient, s, c, "app")));
  EXPECT_FALSE(ProofsEqual(p, ComputeProof(kSecret, Role::kClient, c, s, "app")));
  EXPECT_FALSE(ProofsEqual(p, ComputeProof(kSecret, Role::kClient, s, c, "app2")));
  Proof q = p;
  q[31] ^= 1;
  EXPECT_FALSE(ProofsEqual(p, q));
}

TEST(AuthTableTest, ParsesAFileWithComments) {
  std::string path = WriteFile("auth_ok", std::string("# secrets\n\napp ") + kSecret +
                                              " exec\n  monitor " + kSecret + "XY read:1 \n",
                               0600);
  absl::StatusOr<AuthTable> t = AuthTable::LoadFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 2u);
  ASSERT_NE(t->Find("monitor"), nullptr);
  EXPECT_EQ(t->Find("monitor")->secret, std::string(kSecret) + "XY");
  EXPECT_TRUE(t->Find("monitor")->grant.MayRead(1));
  EXPECT_EQ(t->Find("nobody"), nullptr);
}

TEST(AuthTableTest, TheFirstSecretGrantedPeerIsTheMembersOwn) {
  absl::StatusOr<AuthTable> none = AuthTable::Parse(std::string("app ") + kSecret + " exec\n", "t");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->peer().has_value());
  absl::StatusOr<AuthTable> t =
      AuthTable::Parse(std::string("app ") + kSecret + " exec\nc1 " + kSecret +
                           "1 exec,peer\nc2 " + kSecret + "2 all\n",
                       "t");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->peer().has_value());
  EXPECT_EQ(t->peer()->name, "c1");
  EXPECT_EQ(t->peer()->secret, std::string(kSecret) + "1");
  EXPECT_FALSE(t->Find("c2")->grant.Has(kPeer));  // "all" but a member's
  EXPECT_FALSE(t->Find("app")->grant.Has(kPeer));
  EXPECT_EQ(ParseGrant("exec,peer")->ToString(), "exec,peer");
}

TEST(AuthTableTest, RefusesReadableByOthersAndMalformedLines) {
  std::string text = std::string("app ") + kSecret + " exec\n";
  absl::StatusOr<AuthTable> t = AuthTable::LoadFile(WriteFile("auth_640", text, 0640));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("0640"));
  EXPECT_EQ(AuthTable::LoadFile(WriteFile("auth_604", text, 0604)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  EXPECT_THAT(AuthTable::Parse("app short exec", "f").status().message(), HasSubstr("f:1: "));
  EXPECT_THAT(AuthTable::Parse("app short exec", "f").status().message(), HasSubstr("shorter"));
  EXPECT_THAT(AuthTable::Parse(std::string("\napp ") + kSecret, "f").status().message(),
              HasSubstr("f:2: expected NAME SECRET PERM"));
  EXPECT_THAT(AuthTable::Parse(text + text, "f").status().message(), HasSubstr("given twice"));
  EXPECT_THAT(AuthTable::Parse("# nothing\n", "f").status().message(), HasSubstr("no secrets"));
  EXPECT_EQ(AuthTable::LoadFile("/nonexistent/auth").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CredentialsTest, FirstLineOfAPrivateFileAndTheEnvironment) {
  std::string path =
      WriteFile("creds", std::string("# me\napp ") + kSecret + " exec\nother x y\n", 0600);
  absl::StatusOr<Credentials> c = LoadCredentials(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "app");
  EXPECT_EQ(c->secret, kSecret);
  EXPECT_EQ(LoadCredentials(WriteFile("creds_644", "app x", 0644)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LoadCredentials(WriteFile("creds_empty", "# none\n", 0600)).status().code(),
            absl::StatusCode::kInvalidArgument);

  unsetenv("ARDMA_AUTH_FILE");
  absl::StatusOr<std::optional<Credentials>> env = CredentialsFromEnvironment();
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->has_value());
  setenv("ARDMA_AUTH_FILE", path.c_str(), 1);
  env = CredentialsFromEnvironment();
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env->has_value());
  EXPECT_EQ((*env)->name, "app");
  unsetenv("ARDMA_AUTH_FILE");
}

}  // namespace
}  // namespace ardma::security
