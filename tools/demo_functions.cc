// The "demo" active-code library (see demo_library.h).
#include <cstring>
#include <span>

#include "core/active/function_table.h"
#include "core/memory/heap.h"
#include "core/status_macros.h"
#include "tools/demo_library.h"

namespace {

using ardma::Context;

uint64_t ArgU64(std::string_view args) {
  uint64_t v = 0;
  std::memcpy(&v, args.data(), 8);
  return v;
}

std::string U64Pair(uint64_t a, uint64_t b) {
  char out[16];
  std::memcpy(out, &a, 8);
  std::memcpy(out + 8, &b, 8);
  return std::string(out, 16);
}

absl::StatusOr<std::string> BuildList(Context& ctx, std::string_view args) {
  if (args.size() != 8) return absl::InvalidArgumentError("demo.build_list takes n (u64)");
  uint64_t head = 0;
  // Back to front, so each node's successor is known when the node is written.
  for (uint64_t value = ArgU64(args); value >= 1; --value) {
    ARDMA_ASSIGN_OR_RETURN(uint64_t node, ardma::heap::Allocate(ctx, 16));
    ARDMA_RETURN_IF_ERROR(ctx.Write(node, U64Pair(head, value)));
    head = node;
  }
  return U64Pair(head, 0).substr(0, 8);
}

absl::StatusOr<std::string> SumList(Context& ctx, std::string_view args) {
  if (args.size() != 8) return absl::InvalidArgumentError("demo.sum_list takes head (u64)");
  uint64_t node = ArgU64(args), sum = 0, count = 0;
  char bytes[16];
  while (node != 0) {
    ARDMA_RETURN_IF_ERROR(ctx.Read(node, std::span<char>(bytes, 16)));
    uint64_t value;
    std::memcpy(&node, bytes, 8);
    std::memcpy(&value, bytes + 8, 8);
    sum += value;
    ++count;
  }
  return U64Pair(sum, count);
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(demo, {"demo.build_list", &BuildList}, {"demo.sum_list", &SumList});
