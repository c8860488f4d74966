// FileReader: reads a DFS file's bytes from active code, a block at a time, without copying when
// the code runs next to the data (Context::View), for scanners such as ardma-grep's. Reads the
// layout through dfs_inode.h, as the file system's own operations do.
//
//   ARDMA_ASSIGN_OR_RETURN(FileReader file, FileReader::Open(ctx, ino));
//   std::string scratch;
//   for (uint64_t off = 0; off < file.size();) {
//     ARDMA_ASSIGN_OR_RETURN(std::string_view chunk, file.Chunk(off, &scratch));
//     ... scan chunk ...
//     off += chunk.size();
//   }
//   ARDMA_ASSIGN_OR_RETURN(bool same, file.Unchanged());   // else the file changed: scan again
#ifndef ARDMA_SERVICES_DFS_DFS_READER_H_
#define ARDMA_SERVICES_DFS_DFS_READER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/context/context.h"

namespace ardma::dfs {

class FileReader {
 public:
  // The live file `ino`: NOT_FOUND if it was removed, FAILED_PRECONDITION for a directory.
  static absl::StatusOr<FileReader> Open(Context& ctx, uint64_t ino);

  uint64_t size() const { return size_; }
  // The bytes from `offset` (< size()) to the end of its block or of the file: a view of server
  // memory when local, else of *scratch. Holes read as zeros.
  absl::StatusOr<std::string_view> Chunk(uint64_t offset, std::string* scratch);
  // True if the file has not changed since Open (same inode, same generation).
  absl::StatusOr<bool> Unchanged();

 private:
  FileReader(Context* ctx, uint64_t ino) : ctx_(ctx), ino_(ino) {}
  Context* ctx_;
  uint64_t ino_ = 0, size_ = 0, gen_ = 0, table_ = 0, capacity_ = 0;
  std::vector<uint64_t> blocks_;  // the block table, read on first use
};

}  // namespace ardma::dfs

#endif  // ARDMA_SERVICES_DFS_DFS_READER_H_
