// RootCache: what an RDMA-mode client remembers about its named objects (a list's header address,
// a table's header and geometry, a lock's block), so that an operation does not first resolve the
// name through the heap's roots — and the one rule for when a remembered address went stale.
//
// A cached address goes stale when the server lost its memory (restarted without a memory file)
// and the address now holds something else. A service's algorithm that finds no valid object at a
// client-supplied address says so with StaleRootError — the one staleness signal, a status payload,
// never message text — and RootCache::Run then forgets the entry and tries once more with a fresh
// resolution, which is either right or a real error. Retries are bounded: one.
//
//   RootCache<uint64_t> headers;
//   return headers.Run<std::string>(name, [&](std::optional<uint64_t> cached)
//       -> absl::StatusOr<std::string> {
//     uint64_t header = cached ? *cached : ...resolve the name..., headers.Store(name, header);
//     return ...the operation with `header`...;
//   });
//
// Thread-safe: any number of threads may share one cache.
#ifndef ARDMA_SERVICES_ROOT_CACHE_H_
#define ARDMA_SERVICES_ROOT_CACHE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/status_macros.h"

namespace ardma {

class Client;

// The cache's name for an object: its name, and with ServerScopedName the server it is on (a
// service client over a cluster, Servers, keeps one entry per server that holds an object of that
// name). Borrows the name; looking one up builds no string.
struct ScopedName {
  ScopedName(const char* name) : name(name) {}        // NOLINT: a name on no particular server
  ScopedName(std::string_view name) : name(name) {}   // NOLINT
  ScopedName(const Client* server, std::string_view name) : server(server), name(name) {}
  const Client* server = nullptr;
  std::string_view name;
};
inline ScopedName ServerScopedName(const Client& client, std::string_view name) {
  return ScopedName(&client, name);
}

// `status` (keeping its code and message) marked as "no such object at the address the caller
// gave": the caller's cached address is stale. For the algorithms' header and block checks.
absl::Status StaleRootError(absl::Status status);
bool IsStaleRoot(const absl::Status& status);

template <typename T>
class RootCache {
 public:
  std::optional<T> Find(ScopedName name) const {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(KeyOf(name));
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  void Store(ScopedName name, const T& value) {
    absl::MutexLock lock(&mu_);
    entries_.insert_or_assign(Stored{name.server, std::string(name.name)}, value);
  }
  void Forget(ScopedName name) {
    absl::MutexLock lock(&mu_);
    entries_.erase(KeyOf(name));
  }
  // Applies `update` to the entry for `name`, if there is one.
  void Update(ScopedName name, absl::FunctionRef<void(T&)> update) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(KeyOf(name));
    if (it != entries_.end()) update(it->second);
  }

  // Runs attempt(the cached entry, or nullopt). If that fails with a stale-root status and a
  // cached entry was used, forgets it and runs attempt(nullopt) once more.
  template <typename R>
  absl::StatusOr<R> Run(ScopedName name,
                        absl::FunctionRef<absl::StatusOr<R>(std::optional<T>)> attempt) {
    std::optional<T> cached = Find(name);
    absl::StatusOr<R> result = attempt(cached);
    if (cached.has_value() && IsStaleRoot(result.status())) {
      Forget(name);
      result = attempt(std::nullopt);
    }
    return result;
  }

 private:
  using Stored = std::pair<const Client*, std::string>;
  using Key = std::pair<const Client*, absl::string_view>;
  static Key KeyOf(ScopedName name) { return {name.server, ToAbsl(name.name)}; }
  // Looks a Stored entry up by a Key (no string built).
  struct Hash {
    using is_transparent = void;
    size_t operator()(const Key& k) const { return absl::HashOf(k.first, k.second); }
    size_t operator()(const Stored& k) const { return (*this)(Key(k.first, k.second)); }
  };
  struct Eq {
    using is_transparent = void;
    static Key Of(const Key& k) { return k; }
    static Key Of(const Stored& k) { return Key(k.first, k.second); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const { return Of(a) == Of(b); }
  };

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Stored, T, Hash, Eq> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ardma

#endif  // ARDMA_SERVICES_ROOT_CACHE_H_
