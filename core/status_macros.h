// Status helpers missing from Debian's Abseil (20220623 has no status macros).
//
//   ARDMA_RETURN_IF_ERROR(DoThing());
//   ARDMA_ASSIGN_OR_RETURN(auto value, ComputeValue());
//
// Also the one conversion between std::string_view (used by every project API) and
// absl::string_view (used by Abseil in this Debian build, where the two are distinct types).
#ifndef ARDMA_CORE_STATUS_MACROS_H_
#define ARDMA_CORE_STATUS_MACROS_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ardma {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view FromAbsl(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace ardma

#define ARDMA_STATUS_CONCAT_INNER_(a, b) a##b
#define ARDMA_STATUS_CONCAT_(a, b) ARDMA_STATUS_CONCAT_INNER_(a, b)

#define ARDMA_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status ardma_status_ = (expr);         \
    if (!ardma_status_.ok()) return ardma_status_; \
  } while (0)

#define ARDMA_ASSIGN_OR_RETURN(lhs, expr) \
  ARDMA_ASSIGN_OR_RETURN_IMPL_(ARDMA_STATUS_CONCAT_(ardma_statusor_, __LINE__), lhs, expr)

#define ARDMA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // ARDMA_CORE_STATUS_MACROS_H_
