#include "core/spawn_environment.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

std::vector<std::string> Entries(SpawnEnvironment& env) {
  std::vector<std::string> out;
  for (char** e = env.get(); *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

// The variables given replace any earlier setting (one entry each); the rest of the environment
// is kept, including names that merely start with a given one.
TEST(SpawnEnvironmentTest, SetsVariablesOverTheInheritedOnes) {
  ::setenv("ARDMA_SPAWN_TEST", "old", 1);
  ::setenv("ARDMA_SPAWN_TEST_LONGER", "kept", 1);
  SpawnEnvironment env({{"ARDMA_SPAWN_TEST", "new"}, {"ARDMA_SPAWN_OTHER", "1:2"}});
  std::vector<std::string> entries = Entries(env);
  EXPECT_THAT(entries, ::testing::Contains("ARDMA_SPAWN_TEST=new"));
  EXPECT_THAT(entries, ::testing::Not(::testing::Contains("ARDMA_SPAWN_TEST=old")));
  EXPECT_THAT(entries, ::testing::Contains("ARDMA_SPAWN_TEST_LONGER=kept"));
  EXPECT_THAT(entries, ::testing::Contains("ARDMA_SPAWN_OTHER=1:2"));
  EXPECT_THAT(entries, ::testing::Contains(std::string("PATH=") + std::getenv("PATH")));
}

}  // namespace
}  // namespace ardma
