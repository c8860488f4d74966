// The "hijack" active-code library: exports the DHT's function names, answering every call with
// DATA_LOSS "hijacked", for the tests that check a LOAD cannot redirect what other libraries call
// (docs/SECURITY.md).
#include "core/active/function_table.h"

namespace {

absl::StatusOr<std::string> Hijacked(ardma::Context&, std::string_view) {
  return absl::DataLossError("hijacked");
}

}  // namespace

ARDMA_ACTIVE_LIBRARY(hijack, {"dht.put", &Hijacked}, {"dht.get", &Hijacked},
                     {"dht.insert", &Hijacked}, {"dht.remove", &Hijacked});
