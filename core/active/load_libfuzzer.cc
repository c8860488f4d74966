// libFuzzer entry point for the LOAD fuzz target (load_fuzz.cc); scripts/fuzz.sh seeds it with
// the project's built libraries.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/active/load_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ardma::RunLoadFuzzInput(std::string_view(reinterpret_cast<const char*>(data), size))
      .IgnoreError();
  return 0;
}
