#include "core/active/active_library.h"

#include <openssl/evp.h>

namespace ardma {

CodeHash Sha256(std::string_view bytes) {
  CodeHash hash;
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), hash.data(), &len, EVP_sha256(), nullptr);
  return hash;
}

CodeHash ActiveLibrary::HashOf(std::string_view code, std::string_view sha256_hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  CodeHash hash;
  if (sha256_hex.size() != 2 * hash.size()) return Sha256(code);
  for (size_t i = 0; i < hash.size(); ++i) {
    int high = digit(sha256_hex[2 * i]), low = digit(sha256_hex[2 * i + 1]);
    if (high < 0 || low < 0) return Sha256(code);
    hash[i] = static_cast<uint8_t>(high * 16 + low);
  }
  return hash;
}

ActiveFunction ActiveLibrary::Find(std::string_view function) const {
  if (ActiveFunction fn = table_.Find(function)) return fn;
  for (const ActiveLibrary* dep : deps_) {
    if (ActiveFunction fn = dep->Find(function)) return fn;
  }
  return nullptr;
}

}  // namespace ardma
