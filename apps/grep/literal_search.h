// A search for any of a set of literal strings (case-folded with -i): Horspool's algorithm over
// the set, skipping most bytes of text that cannot hold an occurrence, as GNU grep's kwset does.
// ardma-grep uses it to find candidate lines when every pattern is a plain string.
#ifndef ARDMA_APPS_GREP_LITERAL_SEARCH_H_
#define ARDMA_APPS_GREP_LITERAL_SEARCH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ardma::grep {

class LiteralSearch {
 public:
  // `needles` must be non-empty and none of them empty.
  LiteralSearch(std::vector<std::string> needles, bool ignore_case);

  // Where the first occurrence of any needle at or after `pos` starts; npos if none.
  size_t Find(std::string_view text, size_t pos) const;

 private:
  bool EqualAt(std::string_view text, size_t pos, const std::string& needle) const;
  size_t FindHorspool(std::string_view text, size_t pos) const;
  size_t FindSimd(std::string_view text, size_t pos) const;  // up to 4 needles

  std::vector<std::string> needles_;  // folded with -i
  bool fold_;
  size_t min_ = 0;                   // the shortest needle's length: the window
  std::array<uint8_t, 256> map_{};   // byte -> folded byte
  std::array<size_t, 256> shift_{};  // Horspool's shift for the window's last byte
  std::array<bool, 256> last_{};     // a needle's window ends in this (folded) byte
};

// The number of newlines in `text` (16 bytes at a time).
size_t CountNewlines(std::string_view text);

}  // namespace ardma::grep

#endif  // ARDMA_APPS_GREP_LITERAL_SEARCH_H_
