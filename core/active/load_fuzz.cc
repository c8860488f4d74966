#include "core/active/load_fuzz.h"

#include "core/active/native_loader.h"

namespace ardma {

absl::Status RunLoadFuzzInput(std::string_view code) {
  // As ardmad --isolate loads new code: a trial in the sandbox first (no user switch: the fuzzer
  // need not run as root; no address-space limit: sanitizers reserve terabytes of shadow).
  static NativeLoader loader(/*trial=*/true, sandbox::Policy{.cpu_seconds = 20});
  return loader.Load("fuzz", code).status();
}

}  // namespace ardma
