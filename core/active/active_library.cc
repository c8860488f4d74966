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
  absl::StatusOr<CodeHash> built = wire::HashFromHex(sha256_hex);
  return built.ok() ? *built : Sha256(code);
}

ActiveFunction ActiveLibrary::Find(std::string_view function) const {
  if (ActiveFunction fn = table_.Find(function)) return fn;
  for (const ActiveLibrary* dep : deps_) {
    if (ActiveFunction fn = dep->Find(function)) return fn;
  }
  return nullptr;
}

}  // namespace ardma
