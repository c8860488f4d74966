#include "apps/grep/literal_search.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ardma::grep {

LiteralSearch::LiteralSearch(std::vector<std::string> needles, bool ignore_case)
    : needles_(std::move(needles)), fold_(ignore_case) {
  for (int c = 0; c < 256; ++c) {
    map_[c] = static_cast<uint8_t>(fold_ ? std::tolower(c) : c);  // the C locale's folding
  }
  min_ = SIZE_MAX;
  for (std::string& n : needles_) {
    for (char& c : n) c = static_cast<char>(map_[static_cast<uint8_t>(c)]);
    min_ = std::min(min_, n.size());
  }
  shift_.fill(min_);
  for (const std::string& n : needles_) {
    for (size_t j = 0; j + 1 < min_; ++j) {
      size_t& s = shift_[static_cast<uint8_t>(n[j])];
      s = std::min(s, min_ - 1 - j);
    }
    last_[static_cast<uint8_t>(n[min_ - 1])] = true;
  }
  if (fold_) {  // a folded byte's other case shifts alike
    for (int c = 0; c < 256; ++c) {
      shift_[c] = shift_[map_[c]];
      last_[c] = last_[map_[c]];
    }
  }
}

bool LiteralSearch::EqualAt(std::string_view text, size_t pos, const std::string& needle) const {
  if (pos + needle.size() > text.size()) return false;
  if (!fold_) {
    for (size_t i = 0; i < needle.size(); ++i) {
      if (text[pos + i] != needle[i]) return false;
    }
    return true;
  }
  for (size_t i = 0; i < needle.size(); ++i) {
    if (map_[static_cast<uint8_t>(text[pos + i])] != static_cast<uint8_t>(needle[i])) {
      return false;
    }
  }
  return true;
}

size_t LiteralSearch::Find(std::string_view text, size_t pos) const {
  if (pos > text.size()) return std::string_view::npos;
  if (needles_.size() == 1 && !fold_) {  // glibc's memmem is the fastest for one string
    const void* hit =
        ::memmem(text.data() + pos, text.size() - pos, needles_[0].data(), needles_[0].size());
    return hit == nullptr ? std::string_view::npos
                          : static_cast<size_t>(static_cast<const char*>(hit) - text.data());
  }
#if defined(__SSE2__)
  if (needles_.size() <= 4) return FindSimd(text, pos);
#endif
  return FindHorspool(text, pos);
}

size_t LiteralSearch::FindHorspool(std::string_view text, size_t pos) const {
  const auto* t = reinterpret_cast<const uint8_t*>(text.data());
  while (pos + min_ <= text.size()) {
    uint8_t c = t[pos + min_ - 1];
    if (last_[c]) {
      for (const std::string& n : needles_) {
        if (EqualAt(text, pos, n)) return pos;
      }
    }
    pos += shift_[c];
  }
  return std::string_view::npos;
}

#if defined(__SSE2__)
// Sixteen positions at a time: a needle may start where its first byte and its last byte both
// are (either case with -i); only those positions are compared in full (W. Mula's method).
size_t LiteralSearch::FindSimd(std::string_view text, size_t pos) const {
  size_t longest = 0;
  for (const std::string& n : needles_) longest = std::max(longest, n.size());
  struct Probe {
    __m128i first_a, first_b, last_a, last_b;
    size_t last_at;
  };
  Probe probes[4];
  size_t count = needles_.size();
  for (size_t k = 0; k < count; ++k) {
    const std::string& n = needles_[k];
    auto other = [&](uint8_t c) { return fold_ ? static_cast<uint8_t>(std::toupper(c)) : c; };
    uint8_t f = static_cast<uint8_t>(n.front()), l = static_cast<uint8_t>(n.back());
    probes[k] = {_mm_set1_epi8(static_cast<char>(f)), _mm_set1_epi8(static_cast<char>(other(f))),
                 _mm_set1_epi8(static_cast<char>(l)), _mm_set1_epi8(static_cast<char>(other(l))),
                 n.size() - 1};
  }
  const char* t = text.data();
  for (; pos + longest - 1 + 16 <= text.size(); pos += 16) {
    unsigned any = 0;
    for (size_t k = 0; k < count; ++k) {
      const Probe& p = probes[k];
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t + pos));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t + pos + p.last_at));
      __m128i fa = _mm_or_si128(_mm_cmpeq_epi8(a, p.first_a), _mm_cmpeq_epi8(a, p.first_b));
      __m128i lb = _mm_or_si128(_mm_cmpeq_epi8(b, p.last_a), _mm_cmpeq_epi8(b, p.last_b));
      any |= static_cast<unsigned>(_mm_movemask_epi8(_mm_and_si128(fa, lb)));
    }
    while (any != 0) {
      size_t at = pos + static_cast<size_t>(__builtin_ctz(any));
      for (const std::string& n : needles_) {
        if (EqualAt(text, at, n)) return at;
      }
      any &= any - 1;
    }
  }
  for (; pos < text.size(); ++pos) {  // the tail, one position at a time
    for (const std::string& n : needles_) {
      if (EqualAt(text, pos, n)) return pos;
    }
  }
  return std::string_view::npos;
}
#endif

size_t CountNewlines(std::string_view text) {
  size_t n = 0, i = 0;
#if defined(__SSE2__)
  const __m128i nl = _mm_set1_epi8('\n');
  for (; i + 16 <= text.size(); i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
    n += static_cast<size_t>(__builtin_popcount(_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl))));
  }
#endif
  for (; i < text.size(); ++i) n += text[i] == '\n';
  return n;
}

}  // namespace ardma::grep
