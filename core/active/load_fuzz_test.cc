// The LOAD fuzz target's regression run: fixed corruptions of a real library (truncations, flipped
// bytes, zeroed runs, from a fixed seed) each end in a status, and the intact library still loads.
#include <random>
#include <string>

#include "core/active/load_fuzz.h"
#include "core/active/testdata/test_library.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

TEST(LoadFuzzTest, CorruptedLibrariesEndInAStatusAndTheIntactOneLoads) {
  std::vector<std::string> seeds = {std::string(active_libraries::test2().code()),
                                    std::string(active_libraries::hijack().code())};
  for (const std::string& seed : seeds) EXPECT_TRUE(RunLoadFuzzInput(seed).ok());
  std::mt19937_64 random(20261126);
  int refused = 0;
  for (int i = 0; i < 60; ++i) {
    std::string code = seeds[i % seeds.size()];
    switch (i % 3) {
      case 0:  // truncated
        code.resize(random() % code.size());
        break;
      case 1:  // bytes flipped
        for (int k = 0; k < 8; ++k) code[random() % code.size()] ^= static_cast<char>(random());
        break;
      case 2: {  // a run zeroed
        size_t at = random() % code.size();
        for (size_t k = at; k < std::min(code.size(), at + 64); ++k) code[k] = 0;
        break;
      }
    }
    refused += RunLoadFuzzInput(code).ok() ? 0 : 1;  // either way: no crash here
  }
  EXPECT_GT(refused, 0);  // truncations at least are refused
}

}  // namespace
}  // namespace ardma
