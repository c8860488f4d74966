// StableHash: a 64-bit hash of bytes that every build computes identically (clients, the server
// and shipped active code must agree on it, so neither std::hash nor absl::Hash will do: both may
// change between builds). Used for bucket placement, fingerprints and entry checksums. Not
// cryptographic; it only has to spread keys and catch torn or recycled data.
#ifndef ARDMA_SERVICES_STABLE_HASH_H_
#define ARDMA_SERVICES_STABLE_HASH_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ardma {

// A bijective 64-bit mixer (xor-shift / multiply rounds).
inline uint64_t MixBits(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

// Hashes `bytes` with `seed`: two independent multiply-rotate lanes over 8-byte words, folded and
// mixed at the end. Little-endian word order on every supported host.
inline uint64_t StableHash(std::string_view bytes, uint64_t seed = 0) {
  static_assert(std::endian::native == std::endian::little);
  constexpr uint64_t kA = 0x9e3779b97f4a7c15ull;
  constexpr uint64_t kB = 0xc2b2ae3d27d4eb4full;
  uint64_t a = seed ^ kA, b = (seed + bytes.size()) * kB;
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n >= 16) {
    uint64_t w0, w1;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
    a = std::rotl(a ^ (w0 * kB), 29) * kA;
    b = std::rotl(b ^ (w1 * kA), 31) * kB;
    p += 16;
    n -= 16;
  }
  uint64_t tail[2] = {0, 0};
  std::memcpy(tail, p, n);
  a = std::rotl(a ^ (tail[0] * kB), 29) * kA;
  b = std::rotl(b ^ ((tail[1] + n) * kA), 31) * kB;
  return MixBits(a ^ std::rotl(b, 17) ^ bytes.size());
}

}  // namespace ardma

#endif  // ARDMA_SERVICES_STABLE_HASH_H_
