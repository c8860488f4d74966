// The "listdemo" active-code library: JList.java's linked list in C++, on the same memory layout
// (java_testdata.h), to compare Java with native active code; and listdemo.call, which calls any
// function (native or Java) from native code.
#include <cstring>

#include "core/active/function_table.h"
#include "core/status_macros.h"
#include "core/wire/byte_io.h"

namespace {

using ardma::Context;

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

absl::StatusOr<std::string> Append(Context& ctx, std::string_view args) {
  uint64_t list, value;
  if (args.size() != 16) return absl::InvalidArgumentError("listdemo.append takes list, value");
  std::memcpy(&list, args.data(), 8);
  std::memcpy(&value, args.data() + 8, 8);
  ARDMA_ASSIGN_OR_RETURN(uint64_t node, ctx.FetchAdd(list, 16));
  ARDMA_RETURN_IF_ERROR(ctx.Write(node, U64(0) + U64(value)));
  ARDMA_ASSIGN_OR_RETURN(uint64_t head, ctx.ReadU64(list + 8));
  if (head == 0) {
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(list + 8, node));
  } else {
    uint64_t last = head;
    for (;;) {
      ARDMA_ASSIGN_OR_RETURN(uint64_t next, ctx.ReadU64(last));
      if (next == 0) break;
      last = next;
    }
    ARDMA_RETURN_IF_ERROR(ctx.WriteU64(last, node));
  }
  ARDMA_ASSIGN_OR_RETURN(uint64_t length, ctx.FetchAdd(list + 16, 1));
  return U64(length + 1);
}

absl::StatusOr<std::string> Get(Context& ctx, std::string_view args) {
  uint64_t list, index;
  if (args.size() != 16) return absl::InvalidArgumentError("listdemo.get takes list, index");
  std::memcpy(&list, args.data(), 8);
  std::memcpy(&index, args.data() + 8, 8);
  ARDMA_ASSIGN_OR_RETURN(uint64_t node, ctx.ReadU64(list + 8));
  for (uint64_t i = 0; i < index && node != 0; ++i) {
    ARDMA_ASSIGN_OR_RETURN(node, ctx.ReadU64(node));
  }
  if (node == 0) return absl::OutOfRangeError("no such element");
  ARDMA_ASSIGN_OR_RETURN(uint64_t value, ctx.ReadU64(node + 8));
  return U64(value);
}

absl::StatusOr<std::string> CallAny(Context& ctx, std::string_view args) {
  ardma::wire::ByteReader r(args);
  std::string_view name;
  if (!r.Str16(&name)) return absl::InvalidArgumentError("listdemo.call takes name:str16 args");
  return ctx.Call(name, r.Rest());
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(listdemo, {"listdemo.append", &Append}, {"listdemo.get", &Get},
                     {"listdemo.call", &CallAny});
