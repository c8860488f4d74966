// The ABI between the server and an active-code library: a table of named functions.
//
// A library's sources define their table once with ARDMA_ACTIVE_LIBRARY; the build
// (ardma_active_library in cmake/) compiles them twice: into a shared object whose only export is
// the C entry point `ardma_active_library_v1` (the bytes LOAD ships), and into a static library the
// client links for Mode::kRdma. Server and library must be built from the same Context header:
// kActiveAbiVersion changes whenever Context or this table changes, and the loader refuses a
// mismatch.
//
//   absl::StatusOr<std::string> Echo(ardma::Context& ctx, std::string_view args) {
//     return std::string(args);
//   }
//   ARDMA_ACTIVE_LIBRARY(test, {"test.echo", &Echo}, {"test.noop", &Noop});
//
// Functions must be safe to run concurrently on several threads (each with its own Context).
#ifndef ARDMA_CORE_ACTIVE_FUNCTION_TABLE_H_
#define ARDMA_CORE_ACTIVE_FUNCTION_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/context/context.h"

namespace ardma {

inline constexpr uint32_t kActiveAbiVersion = 2;  // 2: Context::lock_owner

using ActiveFunction = absl::StatusOr<std::string> (*)(Context& ctx, std::string_view args);

struct FunctionEntry {
  const char* name;  // "<library>.<function>"
  ActiveFunction fn;
};

struct FunctionTable {
  uint32_t abi_version;
  const char* library;  // the library's name, e.g. "dht"
  const FunctionEntry* entries;
  size_t count;

  // Linear search: tables are small, and registries index them.
  ActiveFunction Find(std::string_view name) const {
    for (size_t i = 0; i < count; ++i) {
      if (name == entries[i].name) return entries[i].fn;
    }
    return nullptr;
  }
};

}  // namespace ardma

#if defined(ARDMA_ACTIVE_MODULE)
#define ARDMA_ACTIVE_MODULE_ENTRY_(id)                                            \
  extern "C" __attribute__((visibility("default"))) const ::ardma::FunctionTable* \
  ardma_active_library_v1() {                                                     \
    return &ardma_table_##id();                                                   \
  }
#else
#define ARDMA_ACTIVE_MODULE_ENTRY_(id)
#endif

// Defines the function table of library `id` (a C identifier, also the library's name).
#define ARDMA_ACTIVE_LIBRARY(id, ...)                                                              \
  namespace {                                                                                      \
  const ::ardma::FunctionEntry ardma_entries_##id[] = {__VA_ARGS__};                               \
  }                                                                                                \
  const ::ardma::FunctionTable& ardma_table_##id() {                                               \
    static const ::ardma::FunctionTable table{::ardma::kActiveAbiVersion, #id, ardma_entries_##id, \
                                              std::size(ardma_entries_##id)};                      \
    return table;                                                                                  \
  }                                                                                                \
  ARDMA_ACTIVE_MODULE_ENTRY_(id)

#endif  // ARDMA_CORE_ACTIVE_FUNCTION_TABLE_H_
