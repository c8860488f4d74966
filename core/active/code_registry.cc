#include "core/active/code_registry.h"

#include "absl/strings/str_cat.h"
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

std::unique_ptr<LoadedLibrary> LibraryFromTable(const FunctionTable& table) {
  return std::make_unique<TableLibrary>(table);
}

void CodeRegistry::SetLoader(CodeKind kind, std::unique_ptr<CodeLoader> loader) {
  loaders_[kind] = std::move(loader);
}

absl::StatusOr<CodeHash> CodeRegistry::Load(CodeKind kind, std::string_view library_name,
                                            std::string_view code) {
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
  absl::MutexLock lock(&mu_);
  if (!by_hash_.contains(hash)) InsertLocked(hash, kind, std::move(library));
  return hash;
}

void CodeRegistry::AddLinked(const FunctionTable& table, const CodeHash& hash) {
  absl::MutexLock lock(&mu_);
  if (!by_hash_.contains(hash)) InsertLocked(hash, CodeKind::kNative, LibraryFromTable(table));
}

void CodeRegistry::InsertLocked(const CodeHash& hash, CodeKind kind,
                                std::unique_ptr<LoadedLibrary> library) {
  size_t n = library->num_functions();
  Slot slot{kind,
            std::shared_ptr<LoadedLibrary>(std::move(library)),
            {},
            std::make_unique<FunctionStats[]>(n),
            next_sequence_++};
  for (size_t i = 0; i < slot.library->num_functions(); ++i) {
    std::string fn(slot.library->function_name(i));
    slot.functions.emplace(fn, i);
    by_function_[fn] = hash;
  }
  by_library_[std::string(slot.library->name())] = hash;
  by_hash_.emplace(hash, std::move(slot));
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
  size_t index = slot.functions.at(ToAbsl(function));
  return BoundFunction(slot.library, index, &slot.stats[index]);
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
    return absl::NotFoundError(absl::StrCat("library '", ToAbsl(it->second.library->name()),
                                            "' does not export '", ToAbsl(function), "'"));
  }
  return BoundFunction(it->second.library, fn->second, &it->second.stats[fn->second]);
}

std::vector<LibraryInfo> CodeRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<LibraryInfo> out;
  for (const auto& [hash, slot] : by_hash_) {
    LibraryInfo info{hash, slot.kind, std::string(slot.library->name()), {}, false};
    for (size_t i = 0; i < slot.library->num_functions(); ++i) {
      info.functions.emplace_back(slot.library->function_name(i));
    }
    auto newest = by_library_.find(info.name);
    info.newest = newest != by_library_.end() && newest->second == hash;
    out.push_back(std::move(info));
  }
  return out;
}

size_t CodeRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return by_hash_.size();
}

}  // namespace ardma
