// The sandbox's pieces that need no separate process: the policy as it travels in the
// environment, user lookup, and names of system calls. Confinement itself (Enter, the SIGSYS
// report) is tested on real workers and trial loads in tools/sandbox_test.cc.
#include "core/active/sandbox.h"

#include <sys/syscall.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma::sandbox {
namespace {

using ::testing::HasSubstr;

TEST(SandboxPolicyTest, APolicyCrossesTheEnvironmentWhole) {
  Policy p{.profile = Profile::kJvm,
           .user = User{"nobody", 65534, 65534},
           .address_space = 1ull << 33,
           .cpu_seconds = 3600,
           .keep_fds = {3, 4},
           .readable = {"/usr/lib/jvm/x", "/etc/java-17-openjdk"}};
  absl::StatusOr<Policy> back = Policy::Decode(p.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->profile, Profile::kJvm);
  ASSERT_TRUE(back->user.has_value());
  EXPECT_EQ(back->user->name, "nobody");
  EXPECT_EQ(back->user->uid, 65534u);
  EXPECT_EQ(back->address_space, 1ull << 33);
  EXPECT_EQ(back->cpu_seconds, 3600u);
  EXPECT_EQ(back->keep_fds, std::vector<int>({3, 4}));
  EXPECT_EQ(back->readable, p.readable);

  absl::StatusOr<Policy> plain = Policy::Decode(Policy{}.Encode());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->profile, Profile::kNative);
  EXPECT_FALSE(plain->user.has_value());
  EXPECT_TRUE(plain->keep_fds.empty());

  for (const char* bad : {"", "native", "wasm;;0;0;;", "native;x:1;0;0;;", "native;;a;0;;"}) {
    EXPECT_FALSE(Policy::Decode(bad).ok()) << bad;
  }
}

TEST(SandboxPolicyTest, UsersAreLookedUpAndRootIsRefused) {
  absl::StatusOr<User> nobody = LookupUser("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  EXPECT_NE(nobody->uid, 0u);
  EXPECT_EQ(LookupUser(std::to_string(nobody->uid))->name, "nobody");
  EXPECT_THAT(LookupUser("root").status().message(), HasSubstr("is root"));
  EXPECT_EQ(LookupUser("no-such-user-here").status().code(), absl::StatusCode::kNotFound);
}

TEST(SandboxPolicyTest, SystemCallsAreNamedByNumber) {
  EXPECT_EQ(SyscallName(SYS_socket), "socket");
  EXPECT_EQ(SyscallName(SYS_execve), "execve");
  EXPECT_EQ(SyscallName(100000), "#100000");
}

}  // namespace
}  // namespace ardma::sandbox
