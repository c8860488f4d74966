#include "services/dfs/dfs_reader.h"

#include <algorithm>
#include <cstring>

#include "core/status_macros.h"
#include "services/dfs/dfs_format.h"

namespace ardma::dfs {

absl::StatusOr<FileReader> FileReader::Open(Context& ctx, uint64_t ino) {
  char b[kInName];
  ARDMA_RETURN_IF_ERROR(ctx.Read(ino, std::span<char>(b, sizeof(b))));
  auto field = [&](uint64_t off) {
    uint64_t v;
    std::memcpy(&v, b + off, 8);
    return v;
  };
  if (field(0) != kInodeMagic) return absl::NotFoundError("dfs: the file was removed");
  if (field(kInType) != static_cast<uint64_t>(FileType::kFile)) {
    return absl::FailedPreconditionError("dfs: is a directory");
  }
  FileReader r(&ctx, ino);
  r.size_ = field(kInSize);
  r.gen_ = field(kInGen);
  r.table_ = field(kInTable);
  r.capacity_ = field(kInCapacity);
  return r;
}

absl::StatusOr<std::string_view> FileReader::Chunk(uint64_t offset, std::string* scratch) {
  if (offset >= size_) return absl::OutOfRangeError("dfs: read past the end of the file");
  if (blocks_.empty()) {
    uint64_t used = std::min(capacity_, (size_ + kBlockSize - 1) / kBlockSize);
    blocks_.assign(used, 0);
    if (used > 0) {
      ARDMA_RETURN_IF_ERROR(ctx_->Read(
          table_, std::span<char>(reinterpret_cast<char*>(blocks_.data()), 8 * used)));
    }
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

absl::StatusOr<bool> FileReader::Unchanged() {
  char b[kInGen + 8];
  ARDMA_RETURN_IF_ERROR(ctx_->Read(ino_, std::span<char>(b, sizeof(b))));
  uint64_t magic, gen;
  std::memcpy(&magic, b, 8);
  std::memcpy(&gen, b + kInGen, 8);
  return magic == kInodeMagic && gen == gen_;
}

}  // namespace ardma::dfs
