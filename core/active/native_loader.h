// NativeLoader: loads shipped native active-code libraries (shared objects built with
// ardma_active_library) from their bytes.
//
// The bytes go into an anonymous memfd, never a file at a fixed path, and dlopen maps it through
// /proc/self/fd/N with RTLD_LOCAL, so two versions of one library coexist. The memfd stays open as
// long as the library is mapped (for good, if it cannot be unloaded), so its path is unique among
// loaded objects: glibc finds loaded objects by name. The library's entry
// point `ardma_active_library_v1` must return a table of this server's kActiveAbiVersion.
// The ELF structure is checked before dlopen, so truncated or foreign bytes are an error, not a
// crash. Then the library is loaded first in a trial process (this program started again through
// /proc/self/exe, stopped before main by a constructor in native_loader.cc): a library whose
// loading, entry point or table crashes or hangs (10 s) is refused with INVALID_ARGUMENT there, at
// the cost of that process (about 15 ms per new library). Its constructors therefore run twice.
// Native code is trusted code: once loaded it runs inside the server process.
// Thread-safe.
#ifndef ARDMA_CORE_ACTIVE_NATIVE_LOADER_H_
#define ARDMA_CORE_ACTIVE_NATIVE_LOADER_H_

#include <memory>
#include <string_view>

#include "core/active/code_registry.h"

namespace ardma {

class NativeLoader : public CodeLoader {
 public:
  // `trial`: load new code in a trial process first. Off only where the code already passed one
  // (an isolated worker mirroring the server's libraries).
  explicit NativeLoader(bool trial = true) : trial_(trial) {}
  absl::StatusOr<std::unique_ptr<LoadedLibrary>> Load(std::string_view library_name,
                                                      std::string_view code) override;

 private:
  const bool trial_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_NATIVE_LOADER_H_
