#include "services/dfs/dfs_reader.h"

#include <algorithm>
#include <cstring>

#include "core/status_macros.h"
#include "services/dfs/dfs_inode.h"

namespace ardma::dfs {

absl::StatusOr<FileReader> FileReader::Open(Context& ctx, uint64_t ino) {
  absl::StatusOr<Inode> n = ReadInode(ctx, ino);
  if (absl::IsNotFound(n.status())) return absl::NotFoundError("dfs: the file was removed");
  if (!n.ok()) return n.status();
  if (n->type != FileType::kFile) return IsADirectory();
  FileReader r(&ctx, ino);
  r.size_ = n->size;
  r.gen_ = n->gen;
  r.table_ = n->table;
  r.capacity_ = n->capacity;
  return r;
}

absl::StatusOr<std::string_view> FileReader::Chunk(uint64_t offset, std::string* scratch) {
  if (offset >= size_) return absl::OutOfRangeError("dfs: read past the end of the file");
  if (blocks_.empty()) {
    uint64_t used = std::min(capacity_, (size_ + kBlockSize - 1) / kBlockSize);
    ARDMA_ASSIGN_OR_RETURN(blocks_, ReadTable(*ctx_, table_, used));
  }
  uint64_t index = offset / kBlockSize, within = offset % kBlockSize;
  uint64_t len = std::min(kBlockSize - within, size_ - offset);
  uint64_t block = index < blocks_.size() ? blocks_[index] : 0;
  if (block == 0) {  // a hole
    scratch->assign(len, '\0');
    return std::string_view(*scratch);
  }
  if (ctx_->IsLocal()) return ctx_->View(block + within, len);
  scratch->resize(len);
  ARDMA_RETURN_IF_ERROR(ctx_->Read(block + within, std::span<char>(scratch->data(), len)));
  return std::string_view(*scratch);
}

absl::StatusOr<bool> FileReader::Unchanged() { return dfs::Unchanged(*ctx_, ino_, gen_); }

}  // namespace ardma::dfs
