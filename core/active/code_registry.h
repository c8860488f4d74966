// CodeRegistry: the server's loaded active-code libraries, by content hash and by function name.
//
// LOAD hands the bytes to the loader for their kind (native shared object, jvm class/jar, ...),
// which turns them into a LoadedLibrary: a named set of functions. Code is identified by the
// SHA-256 of its bytes, so loading known bytes again is a no-op that returns the same hash.
// Function names ("dht.put") resolve to the newest loaded library that exports them; a request can
// also name the exact version by hash. Libraries are never unloaded while the registry lives, so a
// resolved function stays callable while it runs even if a newer version is loaded meanwhile.
//
// Thread-safe: Load, Resolve and Has may be called from any thread concurrently.
#ifndef ARDMA_CORE_ACTIVE_CODE_REGISTRY_H_
#define ARDMA_CORE_ACTIVE_CODE_REGISTRY_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/active/active_library.h"
#include "core/context/context.h"

namespace ardma {

// One loaded blob of active code.
class LoadedLibrary {
 public:
  virtual ~LoadedLibrary() = default;
  virtual std::string_view name() const = 0;
  virtual size_t num_functions() const = 0;
  virtual std::string_view function_name(size_t index) const = 0;
  virtual absl::StatusOr<std::string> Run(size_t index, Context& ctx, std::string_view args) = 0;
};

// Turns shipped bytes of one kind into a LoadedLibrary.
class CodeLoader {
 public:
  virtual ~CodeLoader() = default;
  // `library_name` is the optional name given with LOAD (may be empty).
  virtual absl::StatusOr<std::unique_ptr<LoadedLibrary>> Load(std::string_view library_name,
                                                              std::string_view code) = 0;
};

// A LoadedLibrary over a FunctionTable linked into this process (built-ins, tests).
std::unique_ptr<LoadedLibrary> LibraryFromTable(const FunctionTable& table);

// Running statistics of one function, used by the server to decide whether an EXECUTE is short
// enough to run on an I/O thread. Relaxed atomics: an approximate average is all that is needed.
struct FunctionStats {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> average_ns{0};  // exponentially weighted, 1/8 per sample
  std::atomic<uint64_t> last_ns{0};     // the most recent run, so a sudden slow run counts at once
  // Set for good once runs on an I/O thread overran three times in a row (see RequestHandler): it
  // never runs there again. `overruns` counts those runs since the last one on an I/O thread that
  // did not overrun (a run preempted once on a loaded machine is forgiven by the next short one).
  // `inline_since_ns` is when a run on an I/O thread began (steady clock), 0 when none is running,
  // so a run that has not ended yet counts too.
  std::atomic<bool> never_inline{false};
  std::atomic<uint32_t> overruns{0};
  std::atomic<int64_t> inline_since_ns{0};
  void Record(uint64_t ns) {
    last_ns.store(ns, std::memory_order_relaxed);
    uint64_t n = calls.fetch_add(1, std::memory_order_relaxed);
    uint64_t avg = average_ns.load(std::memory_order_relaxed);
    average_ns.store(n == 0 ? ns : avg - avg / 8 + ns / 8, std::memory_order_relaxed);
  }
};

// A library as the registry and the calls of its functions hold it: one reference (one atomic
// count per call) keeps its code, its functions' stats and its scope.
struct LoadedCode {
  std::unique_ptr<LoadedLibrary> library;
  std::unique_ptr<FunctionStats[]> stats;  // one per function
  // Where its functions' own calls of other functions look first: the library itself (its
  // hash), then the libraries it was built against.
  std::vector<CodeHash> scope;
};

// A resolved function: keeps its library alive (it may be unloaded meanwhile).
class BoundFunction {
 public:
  BoundFunction(std::shared_ptr<const LoadedCode> code, size_t index)
      : code_(std::move(code)), index_(index) {}
  std::string_view name() const { return code_->library->function_name(index_); }
  FunctionStats& stats() const { return code_->stats[index_]; }
  // Runs the function. Shipped code that throws costs its request, not the server: a C++
  // exception leaving the function is RESOURCE_EXHAUSTED (std::bad_alloc) or INTERNAL naming it.
  absl::StatusOr<std::string> Run(Context& ctx, std::string_view args) const;
  const std::vector<CodeHash>* scope() const { return &code_->scope; }

 private:
  friend class CodeRegistry;  // (ResolveRemembered)
  std::shared_ptr<const LoadedCode> code_;
  size_t index_;
};

// Who loads code, for the name rules (docs/SECURITY.md).
struct LoadAuthority {
  std::string owner;           // the loading secret's name ("" on a server without an auth file)
  bool may_repoint = true;     // may re-point names owned by another secret's library (admin)
  std::vector<CodeHash> deps;  // the libraries the code was built against
};

struct LibraryInfo {
  CodeHash hash;
  CodeKind kind;
  std::string name;
  std::vector<std::string> functions;
  bool newest;  // the library's name resolves to this version
};

// How much code may stay loaded (ardmad --max-libraries, --max-code). A LOAD past either limit
// first unloads unused code: versions no longer the newest of their name, that no running or
// parked call holds and that no loaded library was built against, oldest first. If that is not
// enough the LOAD is RESOURCE_EXHAUSTED. Linked libraries count but are never unloaded.
struct CodeLimits {
  size_t max_libraries = 512;
  uint64_t max_bytes = uint64_t{1} << 30;
};

class CodeRegistry {
 public:
  explicit CodeRegistry(const CodeLimits& limits = {}) : limits_(limits) {}
  CodeRegistry(const CodeRegistry&) = delete;
  CodeRegistry& operator=(const CodeRegistry&) = delete;

  void SetLimits(const CodeLimits& limits) {
    absl::MutexLock lock(&mu_);
    limits_ = limits;
  }
  // Takes ownership of the loader for `kind`. Call before serving.
  void SetLoader(CodeKind kind, std::unique_ptr<CodeLoader> loader);

  // Loads `code` unless its hash is known. FailedPrecondition when this server has no loader
  // for the kind; InvalidArgument when the bytes are not valid code of that kind or define a
  // library other than `library_name`.
  // Re-pointing a function name to this code when another owner's library holds it needs
  // `by.may_repoint` (PermissionDenied otherwise, and nothing changes).
  absl::StatusOr<CodeHash> Load(CodeKind kind, std::string_view library_name, std::string_view code,
                                const LoadAuthority& by = {});
  // Loads every .so (native), .class and .jar (JVM) file in `dir`, in name order; other files are
  // skipped with a warning. The first failure stops and names the file.
  absl::Status LoadDirectory(const std::string& dir);
  // Registers a library whose table is linked into this process, under `hash`.
  void AddLinked(const FunctionTable& table, const CodeHash& hash);
  // Reserves the names `table` exports for the code whose hash is `hash` (a built-in service:
  // ardmad links the services it comes with). Without `by.may_repoint`, a LOAD of other code that
  // exports one of them is PermissionDenied — so a secret with `load` cannot take "dht.put"
  // first and so keep everyone else from loading the real DHT. Call before serving.
  void ReserveNames(const FunctionTable& table, const CodeHash& hash);

  bool Has(const CodeHash& hash) const;
  // NotFound: "no loaded library exports <function>".
  absl::StatusOr<BoundFunction> Resolve(std::string_view function) const;
  // A call made by `caller`'s code: its own library first, then the libraries it was built
  // against, then the newest exporter of the name.
  absl::StatusOr<BoundFunction> ResolveFrom(const BoundFunction& caller,
                                            std::string_view function) const;
  // Only in `caller`'s own library and the libraries it was built against (NotFound otherwise).
  absl::StatusOr<BoundFunction> ResolveWithin(const BoundFunction& caller,
                                              std::string_view function) const;
  absl::StatusOr<BoundFunction> Resolve(const CodeHash& hash, std::string_view function) const;
  // Resolve(hash, function), or Resolve(function) if `hash` is null, remembered by the calling
  // thread (its last few functions) while no library is loaded or unloaded: a request path that
  // calls the same functions over and over skips the registry's lock and maps.
  absl::StatusOr<BoundFunction> ResolveRemembered(const CodeHash* hash,
                                                  std::string_view function) const;

  // Keeps the bytes of code loaded from now on (not linked libraries), so SourceOf can give them
  // (ardmad --isolate sends them to its worker processes). Call before serving.
  void KeepLoadedCode() { keep_code_ = true; }
  struct Source {
    CodeKind kind;
    std::string name;
    std::shared_ptr<const std::string> code;
    std::vector<CodeHash> deps;  // what it was built against
  };
  // What the library `hash` was loaded from; NotFound if it is not loaded or its bytes were not
  // kept (linked, or loaded before KeepLoadedCode).
  absl::StatusOr<Source> SourceOf(const CodeHash& hash) const;

  std::vector<LibraryInfo> List() const;
  size_t size() const;
  uint64_t bytes() const;     // of the code loaded now
  uint64_t unloaded() const;  // libraries unloaded to make room, since start

 private:
  struct Slot {
    CodeKind kind;
    std::shared_ptr<const LoadedCode> loaded;  // held by running calls too
    absl::flat_hash_map<std::string, size_t> functions;
    uint64_t sequence;                        // load order; higher is newer
    std::string owner;                        // who loaded it
    uint64_t bytes;                           // of its code (0: linked in)
    std::shared_ptr<const std::string> code;  // kept for SourceOf (KeepLoadedCode)
    const LoadedLibrary& library() const { return *loaded->library; }
    const std::vector<CodeHash>& scope() const { return loaded->scope; }
  };
  // Unloads unused superseded versions, oldest first, until one more library of `bytes` fits;
  // false if it still does not.
  bool MakeRoomLocked(uint64_t bytes, std::vector<std::shared_ptr<const LoadedCode>>* evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertLocked(const CodeHash& hash, CodeKind kind, std::unique_ptr<LoadedLibrary> library,
                    const LoadAuthority& by, uint64_t bytes,
                    std::shared_ptr<const std::string> code = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  BoundFunction BindLocked(const Slot& slot, size_t index) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  std::map<CodeKind, std::unique_ptr<CodeLoader>> loaders_;  // fixed before serving
  mutable absl::Mutex mu_;
  std::map<CodeHash, Slot> by_hash_ ABSL_GUARDED_BY(mu_);
  // function name -> hash of the newest library exporting it
  absl::flat_hash_map<std::string, CodeHash> by_function_ ABSL_GUARDED_BY(mu_);
  // library name -> hash of its newest version
  absl::flat_hash_map<std::string, CodeHash> by_library_ ABSL_GUARDED_BY(mu_);
  struct Reservation {
    std::string library;
    CodeHash hash;
  };
  // function name -> the built-in service that owns it; fixed before serving
  absl::flat_hash_map<std::string, Reservation> reserved_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // Changes (under mu_) whenever a library is added or unloaded: what a thread remembered at
  // another generation may resolve differently now (ResolveRemembered). Unique in the process,
  // so a registry made where another was destroyed never matches what that one left behind.
  static uint64_t NextGeneration();
  std::atomic<uint64_t> generation_{NextGeneration()};
  CodeLimits limits_ ABSL_GUARDED_BY(mu_);
  bool keep_code_ = false;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unloaded_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_CODE_REGISTRY_H_
