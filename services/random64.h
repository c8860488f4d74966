// Random64: the services' source of nonces, incarnations and lock values — a 64-bit generator per
// thread, seeded from the OS. Not for cryptography.
#ifndef ARDMA_SERVICES_RANDOM64_H_
#define ARDMA_SERVICES_RANDOM64_H_

#include <cstdint>
#include <random>

namespace ardma {

inline uint64_t Random64() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

}  // namespace ardma

#endif  // ARDMA_SERVICES_RANDOM64_H_
