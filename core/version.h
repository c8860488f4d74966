// The project's version and the commit it was built from, for every tool's --version.
#ifndef ARDMA_CORE_VERSION_H_
#define ARDMA_CORE_VERSION_H_

#include <string>
#include <string_view>

namespace ardma {

const char* ProjectVersion();  // "0.1.0"
const char* BuildCommit();     // `git describe --always --dirty` of the tree; "unknown" outside git
// "PROGRAM (Active RDMA toolkit) 0.1.0, commit 1a2b3c4d5e6f", the first line of --version.
std::string VersionLine(std::string_view program);

}  // namespace ardma

#endif  // ARDMA_CORE_VERSION_H_
