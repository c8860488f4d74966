#include "core/active/code_registry.h"

#include <algorithm>
#include <array>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace ardma {
namespace {

class TableLibrary : public LoadedLibrary {
 public:
  explicit TableLibrary(const FunctionTable& table) : table_(table) {}
  std::string_view name() const override { return table_.library; }
  size_t num_functions() const override { return table_.count; }
  std::string_view function_name(size_t index) const override { return table_.entries[index].name; }
  absl::StatusOr<std::string> Run(size_t index, Context& ctx, std::string_view args) override {
    return table_.entries[index].fn(ctx, args);
  }

 private:
  const FunctionTable& table_;
};

}  // namespace

absl::StatusOr<std::string> BoundFunction::Run(Context& ctx, std::string_view args) const {
  try {
    return code_->library->Run(index_, ctx, args);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("active function ", ToAbsl(name()), " ran out of memory (std::bad_alloc)"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("active function ", ToAbsl(name()), " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat("active function ", ToAbsl(name()),
                                            " threw something that is not a std::exception"));
  }
}

std::unique_ptr<LoadedLibrary> LibraryFromTable(const FunctionTable& table) {
  return std::make_unique<TableLibrary>(table);
}

void CodeRegistry::SetLoader(CodeKind kind, std::unique_ptr<CodeLoader> loader) {
  loaders_[kind] = std::move(loader);
}

absl::StatusOr<CodeHash> CodeRegistry::Load(CodeKind kind, std::string_view library_name,
                                            std::string_view code, const LoadAuthority& by) {
  CodeHash hash = Sha256(code);
  if (Has(hash)) return hash;
  auto loader = loaders_.find(kind);
  if (loader == loaders_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this server cannot run code of kind ", wire::CodeKindName(kind),
                     kind == CodeKind::kJvm ? " (it was built without a JDK)" : ""));
  }
  // Loading runs outside the lock: it may be slow (dlopen, class definition).
  ARDMA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedLibrary> library,
                         loader->second->Load(library_name, code));
  if (!library_name.empty() && library->name() != library_name) {
    return absl::InvalidArgumentError(absl::StrCat("LOAD names library '", ToAbsl(library_name),
                                                   "' but the code defines '",
                                                   ToAbsl(library->name()), "'"));
  }
  // Unloaded (if at all) after the lock is released: dlclose may take a while.
  std::vector<std::shared_ptr<const LoadedCode>> evicted;
  absl::MutexLock lock(&mu_);
  if (by_hash_.contains(hash)) return hash;
  if (!by.may_repoint) {
    for (size_t i = 0; i < library->num_functions(); ++i) {
      auto reserved = reserved_.find(ToAbsl(library->function_name(i)));
      if (reserved != reserved_.end() && reserved->second.hash != hash) {
        return absl::PermissionDeniedError(absl::StrCat(
            "'", ToAbsl(library->function_name(i)), "' is a name of the built-in service '",
            reserved->second.library,
            "': only that service's own code may export it unless the secret has 'admin'"));
      }
    }
    for (size_t i = 0; i < library->num_functions(); ++i) {
      auto it = by_function_.find(ToAbsl(library->function_name(i)));
      if (it == by_function_.end()) continue;
      const Slot& holder = by_hash_.at(it->second);
      if (holder.owner == by.owner) continue;
      return absl::PermissionDeniedError(
          absl::StrCat("this LOAD would re-point '", ToAbsl(library->function_name(i)),
                       "' from library '", ToAbsl(holder.library().name()),
                       "', which another secret loaded; that needs the 'admin' "
                       "permission"));
    }
  }
  if (by_hash_.size() + 1 > limits_.max_libraries || bytes_ + code.size() > limits_.max_bytes) {
    if (!MakeRoomLocked(code.size(), &evicted)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no room for more code: ", by_hash_.size(), " libraries (", bytes_,
          " bytes) are loaded and in use or current (limits: ", limits_.max_libraries,
          " libraries, ", limits_.max_bytes, " bytes; ardmad --max-libraries, --max-code)"));
    }
  }
  InsertLocked(hash, kind, std::move(library), by, code.size(),
               keep_code_ ? std::make_shared<const std::string>(code) : nullptr);
  return hash;
}

absl::StatusOr<CodeRegistry::Source> CodeRegistry::SourceOf(const CodeHash& hash) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.code == nullptr) {
    return absl::NotFoundError("the code of that library is not kept");
  }
  const Slot& slot = it->second;
  return Source{slot.kind, std::string(slot.library().name()), slot.code,
                std::vector<CodeHash>(slot.scope().begin() + 1, slot.scope().end())};
}

bool CodeRegistry::MakeRoomLocked(uint64_t bytes,
                                  std::vector<std::shared_ptr<const LoadedCode>>* evicted) {
  auto fits = [&] {
    return by_hash_.size() + 1 <= limits_.max_libraries && bytes_ + bytes <= limits_.max_bytes;
  };
  // Candidates, oldest first: loaded (not linked), not the newest of their name, held by no
  // call (the registry's is the only reference), and no library's dependency.
  absl::flat_hash_set<CodeHash> depended_on;
  for (const auto& [hash, slot] : by_hash_) {
    for (size_t i = 1; i < slot.scope().size(); ++i) depended_on.insert(slot.scope()[i]);
  }
  std::vector<std::pair<uint64_t, CodeHash>> candidates;
  for (const auto& [hash, slot] : by_hash_) {
    auto newest = by_library_.find(std::string(slot.library().name()));
    bool current = newest != by_library_.end() && newest->second == hash;
    if (slot.bytes == 0 || current || depended_on.contains(hash) || slot.loaded.use_count() > 1) {
      continue;
    }
    candidates.emplace_back(slot.sequence, hash);
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [sequence, hash] : candidates) {
    if (fits()) break;
    auto it = by_hash_.find(hash);
    // Function names still pointing here (a newer version dropped them) move to the newest other
    // exporter, or go.
    for (const auto& [fn, index] : it->second.functions) {
      auto owner = by_function_.find(fn);
      if (owner == by_function_.end() || owner->second != hash) continue;
      const Slot* best = nullptr;
      CodeHash best_hash{};
      for (const auto& [other_hash, other] : by_hash_) {
        if (other_hash == hash || !other.functions.contains(fn)) continue;
        if (best == nullptr || other.sequence > best->sequence) {
          best = &other;
          best_hash = other_hash;
        }
      }
      if (best != nullptr) {
        owner->second = best_hash;
      } else {
        by_function_.erase(owner);
      }
    }
    bytes_ -= it->second.bytes;
    ++unloaded_;
    evicted->push_back(std::move(it->second.loaded));  // unloaded by its destructor, unlocked
    by_hash_.erase(it);
    generation_.store(NextGeneration(), std::memory_order_release);
  }
  return fits();
}

void CodeRegistry::ReserveNames(const FunctionTable& table, const CodeHash& hash) {
  for (size_t i = 0; i < table.count; ++i) {
    reserved_[table.entries[i].name] = {table.library, hash};
  }
}

void CodeRegistry::AddLinked(const FunctionTable& table, const CodeHash& hash) {
  absl::MutexLock lock(&mu_);
  if (!by_hash_.contains(hash)) {
    InsertLocked(hash, CodeKind::kNative, LibraryFromTable(table), {}, /*bytes=*/0);
  }
}

void CodeRegistry::InsertLocked(const CodeHash& hash, CodeKind kind,
                                std::unique_ptr<LoadedLibrary> library, const LoadAuthority& by,
                                uint64_t bytes, std::shared_ptr<const std::string> code) {
  auto loaded = std::make_shared<LoadedCode>();
  loaded->stats = std::make_unique<FunctionStats[]>(library->num_functions());
  loaded->library = std::move(library);
  loaded->scope.push_back(hash);
  loaded->scope.insert(loaded->scope.end(), by.deps.begin(), by.deps.end());
  Slot slot{kind, std::move(loaded), {}, next_sequence_++, by.owner, bytes, std::move(code)};
  bytes_ += bytes;
  for (size_t i = 0; i < slot.library().num_functions(); ++i) {
    std::string fn(slot.library().function_name(i));
    slot.functions.emplace(fn, i);
    by_function_[fn] = hash;
  }
  by_library_[std::string(slot.library().name())] = hash;
  by_hash_.emplace(hash, std::move(slot));
  generation_.store(NextGeneration(), std::memory_order_release);
}

bool CodeRegistry::Has(const CodeHash& hash) const {
  absl::MutexLock lock(&mu_);
  return by_hash_.contains(hash);
}

absl::StatusOr<BoundFunction> CodeRegistry::Resolve(std::string_view function) const {
  absl::MutexLock lock(&mu_);
  auto it = by_function_.find(ToAbsl(function));
  if (it == by_function_.end()) {
    return absl::NotFoundError(absl::StrCat("no loaded library exports '", ToAbsl(function), "'"));
  }
  const Slot& slot = by_hash_.at(it->second);
  return BindLocked(slot, slot.functions.at(ToAbsl(function)));
}

absl::StatusOr<BoundFunction> CodeRegistry::ResolveWithin(const BoundFunction& caller,
                                                          std::string_view function) const {
  if (caller.scope() != nullptr) {
    absl::MutexLock lock(&mu_);
    for (const CodeHash& h : *caller.scope()) {
      auto slot = by_hash_.find(h);
      if (slot == by_hash_.end()) continue;  // a dependency never loaded here
      auto fn = slot->second.functions.find(ToAbsl(function));
      if (fn != slot->second.functions.end()) return BindLocked(slot->second, fn->second);
    }
  }
  return absl::NotFoundError(absl::StrCat("'", ToAbsl(caller.name()),
                                          "' was not built against a library exporting '",
                                          ToAbsl(function), "'"));
}

absl::StatusOr<BoundFunction> CodeRegistry::ResolveFrom(const BoundFunction& caller,
                                                        std::string_view function) const {
  absl::StatusOr<BoundFunction> within = ResolveWithin(caller, function);
  return within.ok() ? within : Resolve(function);
}

BoundFunction CodeRegistry::BindLocked(const Slot& slot, size_t index) const {
  return BoundFunction(slot.loaded, index);
}

absl::StatusOr<BoundFunction> CodeRegistry::Resolve(const CodeHash& hash,
                                                    std::string_view function) const {
  absl::MutexLock lock(&mu_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) {
    return absl::NotFoundError(absl::StrCat("no code loaded with hash ", wire::HashToHex(hash)));
  }
  auto fn = it->second.functions.find(ToAbsl(function));
  if (fn == it->second.functions.end()) {
    return absl::NotFoundError(absl::StrCat("library '", ToAbsl(it->second.library().name()),
                                            "' does not export '", ToAbsl(function), "'"));
  }
  return BindLocked(it->second, fn->second);
}

uint64_t CodeRegistry::NextGeneration() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

absl::StatusOr<BoundFunction> CodeRegistry::ResolveRemembered(const CodeHash* hash,
                                                              std::string_view function) const {
  // Weak references: what a thread remembers does not keep a library in use (MakeRoomLocked
  // unloads only code no call holds). Unchanged generation: the library is still loaded.
  struct Remembered {
    const CodeRegistry* registry = nullptr;
    uint64_t generation = 0;
    bool by_hash = false;
    CodeHash hash{};
    std::string function;
    std::weak_ptr<const LoadedCode> code;
    size_t index = 0;
  };
  constexpr size_t kRemembered = 4;
  thread_local std::array<Remembered, kRemembered> remembered;
  thread_local size_t next_replaced = 0;
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  for (Remembered& r : remembered) {
    if (r.registry != this || r.generation != generation || r.by_hash != (hash != nullptr) ||
        (hash != nullptr && r.hash != *hash) || r.function != function) {
      continue;
    }
    if (std::shared_ptr<const LoadedCode> code = r.code.lock(); code != nullptr) {
      return BoundFunction(std::move(code), r.index);
    }
  }
  absl::StatusOr<BoundFunction> fn = hash != nullptr ? Resolve(*hash, function) : Resolve(function);
  if (!fn.ok()) return fn;
  Remembered& r = remembered[next_replaced++ % kRemembered];
  r.registry = this;
  r.generation = generation;  // (read before resolving: a change meanwhile makes it stale)
  r.by_hash = hash != nullptr;
  if (hash != nullptr) r.hash = *hash;
  r.function.assign(function.data(), function.size());
  r.code = fn->code_;
  r.index = fn->index_;
  return fn;
}

std::vector<LibraryInfo> CodeRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<LibraryInfo> out;
  for (const auto& [hash, slot] : by_hash_) {
    LibraryInfo info{hash, slot.kind, std::string(slot.library().name()), {}, false};
    for (size_t i = 0; i < slot.library().num_functions(); ++i) {
      info.functions.emplace_back(slot.library().function_name(i));
    }
    auto newest = by_library_.find(info.name);
    info.newest = newest != by_library_.end() && newest->second == hash;
    out.push_back(std::move(info));
  }
  return out;
}

uint64_t CodeRegistry::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

uint64_t CodeRegistry::unloaded() const {
  absl::MutexLock lock(&mu_);
  return unloaded_;
}

size_t CodeRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return by_hash_.size();
}

absl::Status CodeRegistry::LoadDirectory(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--preload ", dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    wire::CodeKind kind;
    std::string ext = path.extension().string();
    if (ext == ".so") {
      kind = wire::CodeKind::kNative;
    } else if (ext == ".class" || ext == ".jar") {
      kind = wire::CodeKind::kJvm;
    } else {
      ARDMA_LOG(kWarning, "preload: skipping %s (not .so, .class or .jar)", path.string());
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::string code((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::InternalError(absl::StrCat("preload: cannot read ", path.string()));
    }
    absl::StatusOr<wire::CodeHash> hash = Load(kind, "", code);
    if (!hash.ok()) {
      return absl::Status(hash.status().code(),
                          absl::StrCat("preload ", path.string(), ": ", hash.status().message()));
    }
    ARDMA_LOG(kInfo, "preloaded %s (%s)", path.string(), wire::HashToHex(*hash).substr(0, 16));
  }
  return absl::OkStatus();
}

}  // namespace ardma
