// The example's active code: counter.add adds its 8-byte argument to the word at a fixed heap
// address next to the data, and returns the new value.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/active/function_table.h"

namespace {

constexpr uint64_t kCounterAddr = 1 << 20;

absl::StatusOr<std::string> Add(ardma::Context& ctx, std::string_view args) {
  if (args.size() != 8) return absl::InvalidArgumentError("counter.add takes one u64");
  uint64_t delta;
  std::memcpy(&delta, args.data(), 8);
  absl::StatusOr<uint64_t> old = ctx.FetchAdd(kCounterAddr, delta);
  if (!old.ok()) return old.status();
  uint64_t now = *old + delta;
  return std::string(reinterpret_cast<const char*>(&now), 8);
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(counter, {"counter.add", &Add});
