// ActiveLibrary: what a client knows about an active-code library it links: the function table (to
// run the functions locally in Mode::kRdma), the shipped bytes (to LOAD them in Mode::kActive), and
// the libraries its functions Call. Built by ardma_active_library(); one immutable instance per
// library per process, safe to share between threads.
//
//   ARDMA_DECLARE_ACTIVE_LIBRARY(dht);                 // in a header
//   const ardma::ActiveLibrary& lib = ardma::active_libraries::dht();
#ifndef ARDMA_CORE_ACTIVE_ACTIVE_LIBRARY_H_
#define ARDMA_CORE_ACTIVE_ACTIVE_LIBRARY_H_

#include <initializer_list>
#include <string_view>
#include <vector>

#include "core/active/function_table.h"
#include "core/wire/messages.h"

namespace ardma {

using wire::CodeHash;
using wire::CodeKind;

// SHA-256 of `bytes` (libcrypto).
CodeHash Sha256(std::string_view bytes);

class ActiveLibrary {
 public:
  // `sha256_hex`: the code's SHA-256 as the build computed it (64 hex digits; anything else and
  // it is computed here). The server hashes what it is sent itself: a wrong one cannot pass for
  // other code (EnsureLoaded fails with DATA_LOSS).
  ActiveLibrary(const FunctionTable& table, CodeKind kind, std::string_view code,
                std::string_view sha256_hex, std::initializer_list<const ActiveLibrary*> deps)
      : table_(table), kind_(kind), code_(code), hash_(HashOf(code, sha256_hex)), deps_(deps) {}
  ActiveLibrary(const ActiveLibrary&) = delete;
  ActiveLibrary& operator=(const ActiveLibrary&) = delete;

  std::string_view name() const { return table_.library; }
  const FunctionTable& table() const { return table_; }
  CodeKind kind() const { return kind_; }
  std::string_view code() const { return code_; }
  const CodeHash& hash() const { return hash_; }
  const std::vector<const ActiveLibrary*>& deps() const { return deps_; }

  // Finds `function` in this library or, depth first, in the libraries it depends on.
  ActiveFunction Find(std::string_view function) const;

 private:
  static CodeHash HashOf(std::string_view code, std::string_view sha256_hex);

  const FunctionTable& table_;
  const CodeKind kind_;
  const std::string_view code_;
  const CodeHash hash_;
  const std::vector<const ActiveLibrary*> deps_;
};

}  // namespace ardma

#define ARDMA_DECLARE_ACTIVE_LIBRARY(id) \
  namespace ardma::active_libraries {    \
  const ::ardma::ActiveLibrary& id();    \
  }

#endif  // ARDMA_CORE_ACTIVE_ACTIVE_LIBRARY_H_
