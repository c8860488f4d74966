// LiteralSearch against a naive search on random texts: one needle (memmem), up to four (SSE2
// probes) and more (Horspool), with and without case folding, at every start position; and
// CountNewlines against std::count.
#include "apps/grep/literal_search.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "gtest/gtest.h"

namespace ardma::grep {
namespace {

size_t Naive(std::string_view text, size_t pos, const std::vector<std::string>& needles,
             bool fold) {
  auto eq = [&](char a, char b) {
    return fold ? std::tolower(static_cast<unsigned char>(a)) ==
                      std::tolower(static_cast<unsigned char>(b))
                : a == b;
  };
  for (size_t i = pos; i < text.size(); ++i) {
    for (const std::string& n : needles) {
      if (i + n.size() <= text.size() && std::equal(n.begin(), n.end(), text.begin() + i, eq)) {
        return i;
      }
    }
  }
  return std::string_view::npos;
}

TEST(LiteralSearchTest, FindsWhatANaiveSearchFinds) {
  std::mt19937 rng(7);
  const std::string alphabet = "abcABC\n x";
  for (int round = 0; round < 300; ++round) {
    std::string text(rng() % 200, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    std::vector<std::string> needles(1 + rng() % 6);
    for (std::string& n : needles) {
      n.resize(1 + rng() % 4);
      for (char& c : n) c = alphabet[rng() % 6];
    }
    bool fold = rng() % 2 == 0;
    LiteralSearch search(needles, fold);
    for (size_t pos = 0; pos <= text.size(); ++pos) {
      ASSERT_EQ(search.Find(text, pos), Naive(text, pos, needles, fold))
          << "round " << round << " pos " << pos << " needles " << needles.size() << " fold "
          << fold;
    }
  }
}

TEST(LiteralSearchTest, CountsNewlinesInAnyAlignment) {
  std::mt19937 rng(3);
  std::string text(1000, 'a');
  for (char& c : text) c = rng() % 3 == 0 ? '\n' : 'a';
  for (size_t from = 0; from < 40; ++from) {
    for (size_t len : {0u, 1u, 15u, 16u, 17u, 500u}) {
      std::string_view v = std::string_view(text).substr(from, len);
      EXPECT_EQ(CountNewlines(v), static_cast<size_t>(std::count(v.begin(), v.end(), '\n')));
    }
  }
}

}  // namespace
}  // namespace ardma::grep
