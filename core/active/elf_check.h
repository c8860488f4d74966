// CheckElf: the structure of shipped native code, checked before anything maps it. dlopen trusts
// its input: a truncated segment faults when touched, a damaged relocation writes anywhere in the
// process, a damaged name offset reads past the object. Refused here, each is an error instead.
#ifndef ARDMA_CORE_ACTIVE_ELF_CHECK_H_
#define ARDMA_CORE_ACTIVE_ELF_CHECK_H_

#include <string_view>

#include "absl/status/status.h"

namespace ardma {

// InvalidArgument ("cannot load shared object: ...") unless `code` is a 64-bit little-endian
// shared object for this machine whose headers, segments, dynamic section, strings and relocation
// targets all lie within it.
absl::Status CheckElf(std::string_view code);

}  // namespace ardma

#endif  // ARDMA_CORE_ACTIVE_ELF_CHECK_H_
