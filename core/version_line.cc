#include <string>

#include "core/version.h"

namespace ardma {

std::string VersionLine(std::string_view program) {
  return std::string(program) + " (Active RDMA toolkit) " + ProjectVersion() + ", commit " +
         BuildCommit();
}

}  // namespace ardma
