#include "services/root_cache.h"

#include "absl/strings/cord.h"

namespace ardma {
namespace {
constexpr char kStaleRootPayload[] = "ardma.stale_root";
}  // namespace

absl::Status StaleRootError(absl::Status status) {
  status.SetPayload(kStaleRootPayload, absl::Cord("1"));
  return status;
}

bool IsStaleRoot(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kStaleRootPayload).has_value();
}

}  // namespace ardma
