#include "core/active/native_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ardma {
namespace {

std::string FdPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// dlclose, then give the memfd back — unless the object stays mapped (C++ libraries with
// STB_GNU_UNIQUE symbols cannot be unloaded). glibc finds loaded objects by the name they were
// opened with, so if fd N were reused for other code, dlopen("/proc/self/fd/N") would hand back
// this stale object. Such an fd is kept open for the life of the process.
void Unload(void* handle, int fd) {
  ::dlclose(handle);
  std::string path = FdPath(fd);
  if (void* resident = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(resident);
    return;
  }
  ::close(fd);
}

class NativeLibrary : public LoadedLibrary {
 public:
  NativeLibrary(int fd, void* handle, const FunctionTable* table)
      : fd_(fd), handle_(handle), table_(table) {}
  ~NativeLibrary() override { Unload(handle_, fd_); }
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

bool Within(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// dlopen trusts the file: a segment that reaches past the end of the bytes is mapped anyway and
// faults (SIGBUS) when touched. So check the structure first.
absl::Status CheckElf(std::string_view code) {
  auto bad = [](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load shared object: ", why));
  };
  if (code.size() < sizeof(Elf64_Ehdr)) return bad("truncated ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, code.data(), sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return bad("not a 64-bit little-endian ELF object");
  }
#if defined(__x86_64__)
  if (eh.e_machine != EM_X86_64) return bad("built for another machine");
#elif defined(__aarch64__)
  if (eh.e_machine != EM_AARCH64) return bad("built for another machine");
#endif
  if (eh.e_type != ET_DYN) return bad("not a shared object");
  uint64_t size = code.size();
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !Within(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), size)) {
    return bad("program headers outside the file (truncated?)");
  }
  if (eh.e_shnum != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                          !Within(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), size))) {
    return bad("section headers outside the file (truncated?)");
  }
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, code.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type != PT_NULL && !Within(ph.p_offset, ph.p_filesz, size)) {
      return bad("a segment reaches past the end of the file (truncated?)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedLibrary>> NativeLoader::Load(std::string_view library_name,
                                                                  std::string_view code) {
  if (code.size() < 4 || std::memcmp(code.data(),
                                     "\x7f"
                                     "ELF",
                                     4) != 0) {
    return absl::InvalidArgumentError("native code must be an ELF shared object");
  }
  if (absl::Status s = CheckElf(code); !s.ok()) return s;
  int fd = ::memfd_create("ardma-active-code", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (!WriteAll(fd, code)) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("writing code to memfd: ", std::strerror(errno)));
  }
  std::string path = FdPath(fd);
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
    problem =
        absl::InvalidArgumentError(absl::StrCat("library built for active ABI ", table->abi_version,
                                                ", server speaks ", kActiveAbiVersion));
  } else if (table->library == nullptr || table->library[0] == '\0') {
    problem = absl::InvalidArgumentError("library has no name");
  }
  if (!problem.ok()) {
    Unload(handle, fd);
    return problem;
  }
  return std::make_unique<NativeLibrary>(fd, handle, table);
}

}  // namespace ardma
