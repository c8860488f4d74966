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
// With isolation on (ardmad --isolate), the trial process is confined like an isolated worker
// first (sandbox.h), so constructors that open files, make sockets or start programs are refused
// with PERMISSION_DENIED. Such a server keeps shipped code out of its own process: the trial
// reports the library's table, and the server maps the library only when one of its functions
// first runs there (an admin's call with --isolate untrusted), or never (--isolate all).
// Otherwise native code is trusted code: once loaded it runs inside the server process.
// Thread-safe.
#ifndef ARDMA_CORE_ACTIVE_NATIVE_LOADER_H_
#define ARDMA_CORE_ACTIVE_NATIVE_LOADER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/active/code_registry.h"
#include "core/active/sandbox.h"

namespace ardma {

class NativeLoader : public CodeLoader {
 public:
  // When this process maps a library it loads (and so runs its constructors).
  enum class InProcess {
    kAtLoad,  // as it is loaded
    // The first time one of its functions runs in this process, if ever: an isolating server's
    // libraries, whose functions run in isolated workers (the table comes from the trial).
    kOnFirstRun,
    // Never: running one of its functions here is FAILED_PRECONDITION (ardmad --isolate all).
    kNever,
  };
  // What a trial load found in a library.
  struct Table {
    std::string library;
    std::vector<std::string> functions;
  };

  // `trial`: load new code in a trial process first. Off only where the code already passed one
  // (an isolated worker mirroring the server's libraries). `trial_sandbox`: the trial process
  // confines itself so before it loads the code (sandbox.h): a library whose constructors make a
  // forbidden system call is refused with PERMISSION_DENIED naming the call. `in_process`: when
  // this process maps the libraries it loads (kAtLoad without a trial).
  explicit NativeLoader(bool trial = true, std::optional<sandbox::Policy> trial_sandbox = {},
                        InProcess in_process = InProcess::kAtLoad)
      : trial_(trial),
        trial_sandbox_(std::move(trial_sandbox)),
        in_process_(trial ? in_process : InProcess::kAtLoad) {}
  absl::StatusOr<std::unique_ptr<LoadedLibrary>> Load(std::string_view library_name,
                                                      std::string_view code) override;
  // What Load does before this process maps the code: the ELF check (here) and the trial load
  // (in another process). The code runs nowhere in this process.
  absl::Status Check(std::string_view code) const;
  // Changes `in_process` for the libraries loaded from now on (not kAtLoad without a trial).
  void SetInProcess(InProcess in_process) {
    if (trial_) in_process_.store(in_process, std::memory_order_relaxed);
  }

 private:
  struct Vetted {
    int fd;              // the code in a memfd, for dlopen
    std::string report;  // the trial's table (empty without a trial)
  };
  // Check's work.
  absl::StatusOr<Vetted> Vet(std::string_view code) const;
  const bool trial_;
  const std::optional<sandbox::Policy> trial_sandbox_;
  std::atomic<InProcess> in_process_;
};

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_NATIVE_LOADER_H_
