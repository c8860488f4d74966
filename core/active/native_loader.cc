#include "core/active/native_loader.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

class NativeLibrary : public LoadedLibrary {
 public:
  NativeLibrary(int fd, void* handle, const FunctionTable* table)
      : fd_(fd), handle_(handle), table_(table) {}
  ~NativeLibrary() override {
    ::dlclose(handle_);
    ::close(fd_);
  }
  std::string_view name() const override { return table_->library; }
  size_t num_functions() const override { return table_->count; }
  std::string_view function_name(size_t index) const override {
    return table_->entries[index].name;
  }
  absl::StatusOr<std::string> Run(size_t index, Context& ctx, std::string_view args) override {
    return table_->entries[index].fn(ctx, args);
  }

 private:
  const int fd_;
  void* const handle_;
  const FunctionTable* const table_;
};

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedLibrary>> NativeLoader::Load(std::string_view library_name,
                                                                  std::string_view code) {
  if (code.size() < 4 || std::memcmp(code.data(), "\x7f" "ELF", 4) != 0) {
    return absl::InvalidArgumentError("native code must be an ELF shared object");
  }
  int fd = ::memfd_create("ardma-active-code", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (!WriteAll(fd, code)) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("writing code to memfd: ", std::strerror(errno)));
  }
  std::string path = absl::StrCat("/proc/self/fd/", fd);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load shared object: ", err != nullptr ? err : "unknown error"));
  }
  using Entry = const FunctionTable* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "ardma_active_library_v1"));
  const FunctionTable* table = entry != nullptr ? entry() : nullptr;
  absl::Status problem;
  if (table == nullptr) {
    problem = absl::InvalidArgumentError(
        "shared object has no ardma_active_library_v1 entry point (build it with "
        "ardma_active_library)");
  } else if (table->abi_version != kActiveAbiVersion) {
    problem = absl::InvalidArgumentError(absl::StrCat("library built for active ABI ",
                                                      table->abi_version, ", server speaks ",
                                                      kActiveAbiVersion));
  } else if (table->library == nullptr || table->library[0] == '\0') {
    problem = absl::InvalidArgumentError("library has no name");
  }
  if (!problem.ok()) {
    ::dlclose(handle);
    ::close(fd);
    return problem;
  }
  return std::make_unique<NativeLibrary>(fd, handle, table);
}

}  // namespace ardma
