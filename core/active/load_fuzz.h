// The LOAD path's fuzz target: native code bytes (corrupted ELF libraries) through NativeLoader's
// vetting — its ELF check in this process and the sandboxed trial process. A crash or hang must
// cost at most the trial process; every input ends in a status. Built with libFuzzer by scripts/fuzz.sh
// (load_libfuzzer.cc, seeded with the project's built libraries); load_fuzz_test runs fixed
// corruptions of real libraries in the test suite.
#ifndef ARDMA_CORE_ACTIVE_LOAD_FUZZ_H_
#define ARDMA_CORE_ACTIVE_LOAD_FUZZ_H_

#include <string_view>

#include "absl/status/status.h"

namespace ardma {

// Vets `code` as a native library (NativeLoader::Check); its status.
absl::Status RunLoadFuzzInput(std::string_view code);

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_LOAD_FUZZ_H_
