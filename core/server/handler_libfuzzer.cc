// libFuzzer entry points for the request-handler fuzz target (handler_fuzz.cc). With
// ARDMA_FUZZ_SEEDS=DIR, the seeds are written to DIR first (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/server/handler_fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("ARDMA_FUZZ_SEEDS")) {
    int i = 0;
    for (const std::string& seed : ardma::HandlerFuzzSeeds()) {
      std::ofstream(std::string(dir) + "/seed-" + std::to_string(i++), std::ios::binary) << seed;
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ardma::RunHandlerFuzzInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
