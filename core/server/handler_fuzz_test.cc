// The request-handler fuzz target (handler_fuzz.cc) in the normal build: every seed, then 20,000
// deterministic mutations of them (bytes flipped, inserted, dropped; seeds cut and spliced). The
// long runs with sanitizers and coverage guidance are scripts/fuzz.sh's.
#include "core/server/handler_fuzz.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ardma {
namespace {

TEST(HandlerFuzzTest, SeedsAndTheirMutationsRunClean) {
  std::vector<std::string> seeds = HandlerFuzzSeeds();
  ASSERT_GT(seeds.size(), 20u);
  for (const std::string& seed : seeds) RunHandlerFuzzInput(seed);
  // The UCX seeds opened sessions, and their requests were answered over UCX.
  HandlerFuzzUcxReach ucx = HandlerFuzzUcx();
  EXPECT_GE(ucx.sessions, 2u);
  EXPECT_GE(ucx.answers, 1u);
  std::mt19937_64 random(2026);
  for (int i = 0; i < 20000; ++i) {
    std::string input = seeds[random() % seeds.size()];
    int edits = 1 + static_cast<int>(random() % 6);
    for (int e = 0; e < edits && !input.empty(); ++e) {
      size_t at = random() % input.size();
      switch (random() % 5) {
        case 0:
          input[at] = static_cast<char>(input[at] ^ (1 << (random() % 8)));
          break;
        case 1:
          input[at] = static_cast<char>(random());
          break;
        case 2:
          input.insert(at, 1, static_cast<char>(random()));
          break;
        case 3:
          input.erase(at, 1 + random() % 8);
          break;
        default:
          input += seeds[random() % seeds.size()].substr(0, random() % 64);
          break;
      }
    }
    RunHandlerFuzzInput(input);  // aborts on a broken invariant
  }
}

}  // namespace
}  // namespace ardma
