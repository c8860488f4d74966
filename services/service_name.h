// The rule every service applies to the names of its objects (lists, tables, ...): they become
// heap root names "<prefix><name>", so they are 1 to `max_bytes` bytes without NUL.
#ifndef ARDMA_SERVICES_SERVICE_NAME_H_
#define ARDMA_SERVICES_SERVICE_NAME_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ardma {

// InvalidArgument("<what> names are 1 to N bytes without NUL") unless `name` qualifies.
inline absl::Status CheckServiceName(std::string_view name, size_t max_bytes,
                                     std::string_view what) {
  if (name.empty() || name.size() > max_bytes || name.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(what.data(), what.size()),
                                                   " names are 1 to ", max_bytes,
                                                   " bytes without NUL"));
  }
  return absl::OkStatus();
}

}  // namespace ardma

#endif  // ARDMA_SERVICES_SERVICE_NAME_H_
