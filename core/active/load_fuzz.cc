#include "core/active/load_fuzz.h"

#include "core/active/native_loader.h"

namespace ardma {

absl::Status RunLoadFuzzInput(std::string_view code) {
  // As ardmad --isolate vets new code: the ELF check in this process, then a trial in the sandbox
  // (no user switch: the fuzzer need not run as root; no address-space limit: sanitizers reserve
  // terabytes of shadow). Not the server's own dlopen that follows a trial today: that runs the
  // library's constructors here, which no check can make safe (load_fuzz_findings/README.md).
  static NativeLoader loader(/*trial=*/true, sandbox::Policy{.cpu_seconds = 20});
  return loader.Check(code);
}

}  // namespace ardma
