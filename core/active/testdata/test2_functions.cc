// The "test2" active-code library: called by "test" through Context::Call.
#include "core/active/function_table.h"
#include "core/active/testdata/test_library.h"

namespace {

absl::StatusOr<std::string> Double(ardma::Context&, std::string_view args) {
  if (args.size() != 8) return absl::InvalidArgumentError("test2.double takes one u64");
  return ardma::testing::U64s({2 * ardma::testing::U64At(args, 0)});
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(test2, {"test2.double", &Double});
